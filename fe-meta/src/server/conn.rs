//! The client listener: one task per connection; a connection is a four-letter word or a
//! framed, pipelined session (`docs/PROTOCOL.md` §1–§2, served by `framed`).
//!
//! A request's deadline starts when its frame is decoded (`RequestContext::new`).
//!
//! INV-1: no input crashes the server (`framed` INV-4 for sessions).
//! INV-2: every connection task ends when the server shuts down.
//! Four-letter words off `4lw.commands.whitelist` are refused in text, as ZooKeeper does.
//!
//! INV-3: a four-letter word's connection is closed only after the client's remaining input is
//! read (at most [`DRAIN_MAX`] bytes, [`DRAIN_WAIT`]): closing a socket with unread input makes
//! the kernel reset it, and the client may then drop the answer it had not read yet.
//!
//! With `client.secure=true` every connection first completes a TLS handshake (`tls`); the
//! four-letter words then work over TLS too (`openssl s_client`), not over plain `nc`.

mod backup;
mod framed;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, Instrument};
use zab_net::tls::Stream;

use super::Shared;
use crate::protocol::{classify_start, refuse_unknown_word, refuse_unlisted_word, ConnectionStart};

/// Accepts connections until `stop` is cancelled.
pub async fn run_listener(shared: Arc<Shared>, listener: TcpListener, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let (shared, stop) = (shared.clone(), stop.clone());
                let span = tracing::debug_span!("client", %peer);
                tokio::spawn(
                    async move {
                        tokio::select! {
                            () = stop.cancelled() => {}
                            () = serve(shared, stream, peer) => {}
                        }
                    }
                    .instrument(span),
                );
            }
            Err(e) => {
                debug!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

async fn serve(shared: Arc<Shared>, tcp: TcpStream, peer: SocketAddr) {
    let _ = tcp.set_nodelay(true);
    let (mut stream, identity) = match &shared.cfg.client_tls {
        None => (Stream::Plain(tcp), None),
        Some(tls) => match tls.accept(tcp, peer).await {
            Some(accepted) => accepted,
            None => return shared.stats.tls_refused(),
        },
    };
    let mut first = [0u8; 4];
    if stream.read_exact(&mut first).await.is_err() {
        return;
    }
    match classify_start(first) {
        ConnectionStart::FourLetterWord(word) => {
            let text = if shared.cfg.four_letter_words.contains(&word) {
                shared.word_text(word).await
            } else {
                refuse_unlisted_word(word)
            };
            answer_and_close(stream, &text).await;
        }
        ConnectionStart::UnknownWord(word) => {
            answer_and_close(stream, &refuse_unknown_word(word)).await;
        }
        ConnectionStart::Frames => {
            let (id, conn) = shared.stats.open(peer.to_string(), identity);
            if let Some(who) = &conn.identity {
                debug!(identity = %who, "client authenticated by its TLS certificate");
            }
            framed::serve(&shared, stream, first, &conn, peer).await;
            shared.stats.close(id);
        }
    }
}

/// Most bytes read and dropped after a four-letter word's answer (INV-3).
const DRAIN_MAX: usize = 4096;
/// How long the rest of a four-letter word's input is waited for (INV-3).
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Writes a four-letter word's answer, closes the sending side, then reads and drops what the
/// client sent after the word (`echo srvr | nc` sends a newline) until it closes too (INV-3).
async fn answer_and_close(mut stream: Stream, text: &str) {
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
    let drain = async {
        let mut rest = [0u8; 512];
        let mut drained = 0;
        while drained < DRAIN_MAX {
            match stream.read(&mut rest).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_WAIT, drain).await;
}
