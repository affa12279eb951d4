//! [`Stream`]: plain TCP or TLS over TCP behind one `AsyncRead + AsyncWrite` type.
//!
//! INV-1: a plain stream splits into tokio's owned TCP halves (no lock between the halves, as
//! before TLS existed); only a TLS stream splits through `tokio::io::split`.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

/// A connection, plain or TLS.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP (either side of the handshake).
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket under the stream.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }

    /// The other end's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().peer_addr()
    }

    /// Sets TCP_NODELAY.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.tcp().set_nodelay(on)
    }

    /// The certificate chain the other end presented (TLS only, end entity first).
    pub fn peer_certificates(&self) -> Option<&[rustls_pki_types::CertificateDer<'static>]> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(s) => s.get_ref().1.peer_certificates(),
        }
    }

    /// The two halves, for a reader task and a writer task (INV-1).
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Plain(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Plain(r), WriteHalf::Plain(w))
            }
            Stream::Tls(s) => {
                let (r, w) = tokio::io::split(*s);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
        }
    }
}

/// The reading half of a [`Stream`].
#[derive(Debug)]
pub enum ReadHalf {
    /// Plain TCP.
    Plain(OwnedReadHalf),
    /// TLS.
    Tls(tokio::io::ReadHalf<TlsStream<TcpStream>>),
}

/// The writing half of a [`Stream`].
#[derive(Debug)]
pub enum WriteHalf {
    /// Plain TCP.
    Plain(OwnedWriteHalf),
    /// TLS.
    Tls(tokio::io::WriteHalf<TlsStream<TcpStream>>),
}

macro_rules! delegate_read {
    ($ty:ty, $($variant:ident),+) => {
        impl AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }
    };
}

macro_rules! delegate_write {
    ($ty:ty, $($variant:ident),+) => {
        impl AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_write(cx, buf),)+
                }
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_write_vectored(cx, bufs),)+
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    $(Self::$variant(s) => s.is_write_vectored(),)+
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_flush(cx),)+
                }
            }

            fn poll_shutdown(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_shutdown(cx),)+
                }
            }
        }
    };
}

delegate_read!(Stream, Plain, Tls);
delegate_write!(Stream, Plain, Tls);
delegate_read!(ReadHalf, Plain, Tls);
delegate_write!(WriteHalf, Plain, Tls);
