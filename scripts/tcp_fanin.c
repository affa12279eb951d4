/*
 * The ceiling under W3 on this machine: closed-loop clients against servers that do no work.
 *
 *   tcp_fanin SERVERS CLIENTS SECONDS BYTES
 *
 * Forks SERVERS echo servers on 127.0.0.1, each one process with one thread (an epoll loop
 * that answers every request with as many bytes as it read), like a node's one runtime
 * thread. CLIENTS connections, client i to server i % SERVERS, each send BYTES and wait for
 * BYTES back, in a loop; two client threads drive half the connections each (the bench's
 * client runtime has two workers). After one second of warm-up it counts SECONDS of
 * round trips and prints one line:
 *
 *   fanin servers=S clients=C bytes=B secs=T ops_per_s=N p50_us=.. p99_us=.. server_cores=..
 *
 * server_cores is the servers' CPU time over the run (from /proc/<pid>/stat). A replicated
 * write costs the same client round trip plus the replication, so W3 can only approach this.
 *
 * Bounded: the whole run ends by itself after SECONDS + 30 s (alarm), and the servers die with
 * the client process (PR_SET_PDEATHSIG), however it ends.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 1024
#define CLIENT_THREADS 2
#define LAT_CAP (1 << 22)

static void die(const char *what) {
    perror(what);
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("TCP_NODELAY");
}

/* One echo server: answers every readable connection with what it read. Never returns. */
static void serve(int listener) {
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = listener};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) < 0) die("epoll_ctl");
    char buf[65536];
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == listener) {
                int c = accept(listener, NULL, NULL);
                if (c < 0) die("accept");
                nodelay(c);
                struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) < 0) die("epoll_ctl");
                continue;
            }
            ssize_t got = read(fd, buf, sizeof buf);
            if (got <= 0) {
                close(fd);
                continue;
            }
            for (ssize_t off = 0; off < got;) {
                ssize_t w = write(fd, buf + off, (size_t)(got - off));
                if (w < 0) {
                    if (errno == EINTR || errno == EAGAIN) continue;
                    die("server write");
                }
                off += w;
            }
        }
    }
}

struct client_thread {
    int fds[MAX_CLIENTS];
    int nfds;
    size_t bytes;
    uint64_t warm_end, run_end;
    uint64_t ops;
    uint32_t *lat_us;
    size_t nlat;
};

/* Drives its connections: one request in flight on each, until run_end. */
static void *drive(void *arg) {
    struct client_thread *t = arg;
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    char *req = calloc(1, t->bytes);
    char buf[65536];
    uint64_t sent_at[MAX_CLIENTS];
    size_t got[MAX_CLIENTS];
    for (int i = 0; i < t->nfds; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, t->fds[i], &ev) < 0) die("epoll_ctl");
        sent_at[i] = now_ns();
        got[i] = 0;
        if (write(t->fds[i], req, t->bytes) != (ssize_t)t->bytes) die("client write");
    }
    struct epoll_event evs[MAX_CLIENTS];
    for (;;) {
        int n = epoll_wait(ep, evs, MAX_CLIENTS, 100);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        uint64_t now = now_ns();
        if (now >= t->run_end) break;
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            ssize_t r = read(t->fds[i], buf, sizeof buf);
            if (r <= 0) die("client read");
            got[i] += (size_t)r;
            if (got[i] < t->bytes) continue;
            got[i] = 0;
            uint64_t done = now_ns();
            if (sent_at[i] >= t->warm_end && done < t->run_end) {
                t->ops++;
                if (t->nlat < LAT_CAP) t->lat_us[t->nlat++] = (uint32_t)((done - sent_at[i]) / 1000);
            }
            sent_at[i] = done;
            if (write(t->fds[i], req, t->bytes) != (ssize_t)t->bytes) die("client write");
        }
    }
    free(req);
    close(ep);
    return NULL;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* utime + stime of a process, in clock ticks. */
static unsigned long long cpu_ticks(pid_t pid) {
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    char *p = strrchr(line, ')');
    if (!p) return 0;
    unsigned long long ut = 0, st = 0;
    /* after ") ": state is field 3; utime and stime are fields 14 and 15 */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return 0;
    return ut + st;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s SERVERS CLIENTS SECONDS BYTES\n", argv[0]);
        return 2;
    }
    int servers = atoi(argv[1]), clients = atoi(argv[2]), secs = atoi(argv[3]);
    size_t bytes = (size_t)atol(argv[4]);
    if (servers < 1 || servers > 16 || clients < 1 || clients > MAX_CLIENTS || secs < 1 ||
        bytes < 1 || bytes > 65536) {
        fprintf(stderr, "SERVERS 1..16, CLIENTS 1..%d, SECONDS >= 1, BYTES 1..65536\n", MAX_CLIENTS);
        return 2;
    }
    alarm((unsigned)secs + 30); /* the default action ends the run, and the servers with it */
    pid_t pids[16];
    struct sockaddr_in addrs[16];
    for (int s = 0; s < servers; s++) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        if (l < 0) die("socket");
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(l, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
        if (listen(l, MAX_CLIENTS) < 0) die("listen");
        socklen_t len = sizeof addrs[s];
        if (getsockname(l, (struct sockaddr *)&addrs[s], &len) < 0) die("getsockname");
        pids[s] = fork();
        if (pids[s] < 0) die("fork");
        if (pids[s] == 0) {
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) die("PR_SET_PDEATHSIG");
            if (getppid() == 1) _exit(1); /* the client is gone already */
            serve(l);
        }
        close(l);
    }
    struct client_thread ts[CLIENT_THREADS];
    memset(ts, 0, sizeof ts);
    uint64_t start = now_ns();
    for (int t = 0; t < CLIENT_THREADS; t++) {
        ts[t].bytes = bytes;
        ts[t].warm_end = start + 1000000000ull;
        ts[t].run_end = ts[t].warm_end + (uint64_t)secs * 1000000000ull;
        ts[t].lat_us = malloc(sizeof(uint32_t) * LAT_CAP);
        if (!ts[t].lat_us) die("malloc");
    }
    for (int i = 0; i < clients; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        if (connect(fd, (struct sockaddr *)&addrs[i % servers], sizeof addrs[0]) < 0) die("connect");
        nodelay(fd);
        struct client_thread *t = &ts[i % CLIENT_THREADS];
        t->fds[t->nfds++] = fd;
    }
    pthread_t th[CLIENT_THREADS];
    for (int t = 0; t < CLIENT_THREADS; t++) pthread_create(&th[t], NULL, drive, &ts[t]);
    struct timespec warm = {.tv_sec = 1};
    nanosleep(&warm, NULL);
    unsigned long long cpu0 = 0, cpu1 = 0;
    for (int s = 0; s < servers; s++) cpu0 += cpu_ticks(pids[s]);
    uint64_t t0 = now_ns();
    for (int t = 0; t < CLIENT_THREADS; t++) pthread_join(th[t], NULL);
    uint64_t t1 = now_ns();
    for (int s = 0; s < servers; s++) cpu1 += cpu_ticks(pids[s]);
    for (int s = 0; s < servers; s++) {
        kill(pids[s], SIGKILL);
        waitpid(pids[s], NULL, 0);
    }
    uint64_t ops = 0;
    size_t nlat = 0;
    for (int t = 0; t < CLIENT_THREADS; t++) {
        ops += ts[t].ops;
        nlat += ts[t].nlat;
    }
    uint32_t *all = malloc(sizeof(uint32_t) * (nlat ? nlat : 1));
    if (!all) die("malloc");
    size_t k = 0;
    for (int t = 0; t < CLIENT_THREADS; t++) {
        memcpy(all + k, ts[t].lat_us, sizeof(uint32_t) * ts[t].nlat);
        k += ts[t].nlat;
    }
    qsort(all, nlat, sizeof(uint32_t), cmp_u32);
    uint32_t p50 = nlat ? all[nlat / 2] : 0, p99 = nlat ? all[nlat * 99 / 100] : 0;
    double wall = (double)(t1 - t0) / 1e9;
    double server_cores = (double)(cpu1 - cpu0) / (double)sysconf(_SC_CLK_TCK) / wall;
    printf("fanin servers=%d clients=%d bytes=%zu secs=%d ops_per_s=%.0f p50_us=%u p99_us=%u "
           "server_cores=%.2f\n",
           servers, clients, bytes, secs, (double)ops / secs, p50, p99, server_cores);
    return 0;
}
