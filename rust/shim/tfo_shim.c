/* pltlab TFO shim: LD_PRELOAD library that turns on TCP Fast Open for every
 * outgoing TCP connection of an unmodified program (Chromium).
 *
 * connect() is intercepted; for AF_INET/AF_INET6 SOCK_STREAM sockets it sets
 * TCP_FASTOPEN_CONNECT (30) before calling the real connect() (dlsym
 * RTLD_NEXT). With that option the kernel defers the SYN to the first write
 * and carries the data in it when it holds a TFO cookie for the server
 * (net.ipv4.tcp_fastopen & 1 must allow client TFO). Errors of the setsockopt
 * are ignored: the connection then goes ahead without TFO.
 *
 * Environment: PLTLAB_TFO_SHIM_DEBUG=1 prints one line per socket on stderr.
 * Built by rust/build.rs and embedded in pltlab-dp (`pltlab-dp shim --out P`).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30
#endif

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static connect_fn real_connect_fn(void) {
    static connect_fn fn = NULL;
    if (!fn) fn = (connect_fn)dlsym(RTLD_NEXT, "connect");
    return fn;
}

__attribute__((visibility("default"))) int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    connect_fn real = real_connect_fn();
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    if (addr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
        int type = 0;
        socklen_t tl = sizeof(type);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
            int one = 1;
            int saved = errno;
            int r = setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof(one));
            const char *dbg = getenv("PLTLAB_TFO_SHIM_DEBUG");
            if (dbg && *dbg && *dbg != '0')
                fprintf(stderr, "pltlab-tfo-shim: fd %d TCP_FASTOPEN_CONNECT %s\n", fd,
                        r == 0 ? "on" : "refused");
            errno = saved;
        }
    }
    return real(fd, addr, len);
}
