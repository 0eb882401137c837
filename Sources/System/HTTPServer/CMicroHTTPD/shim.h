#pragma once
#include <microhttpd.h>
#include <poll.h>
#include <sys/socket.h>

// Swift cannot import C-variadic functions, so each variadic libmicrohttpd call the HTTPServer module
// needs gets one typed static inline wrapper here. Nothing else belongs in this file.

/// Why: `MHD_start_daemon` is variadic. Starts a daemon on an already bound, listening socket
/// (`MHD_OPTION_LISTEN_SOCKET`, so bind errors come from our own `bind` with a real errno), with a
/// request-completed callback, a URI log callback (it sees the raw, still escaped request target and its
/// result becomes the request's context), a connection notification (a connection's start and
/// close), a per-connection memory limit (caps the request header size), an idle timeout in
/// seconds, a connection limit and a limit per client address. MHD closes `listen_fd` in
/// `MHD_stop_daemon`.
static inline struct MHD_Daemon *baton_mhd_start(
    unsigned int flags, int listen_fd,
    MHD_AccessHandlerCallback handler, void *handler_cls,
    MHD_RequestCompletedCallback completed, void *completed_cls,
    void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *connection), void *uri_log_cls,
    MHD_NotifyConnectionCallback notify, void *notify_cls,
    size_t memory_limit, unsigned int timeout_seconds, unsigned int connection_limit,
    unsigned int per_ip_limit)
{
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, uri_log_cls,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
                            MHD_OPTION_END);
}

/// Why: `MHD_get_connection_info` is variadic. The connection's socket, or -1.
static inline int baton_mhd_connection_fd(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : (int)info->connect_fd;
}

/// Why: `MHD_get_connection_info` is variadic. The client's address (IPv4 or IPv6), or NULL.
static inline const struct sockaddr *baton_mhd_client_address(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/// Why: `POLLRDHUP` is a GNU extension the Glibc module does not export. Nonzero when the peer of a
/// connected socket has closed or reset it, without consuming any data.
static inline int baton_peer_closed(int fd)
{
#ifdef POLLRDHUP
    short rdhup = POLLRDHUP;
#else
    short rdhup = 0x2000; /* Linux value */
#endif
    struct pollfd p = { .fd = fd, .events = rdhup, .revents = 0 };
    if (poll(&p, 1, 0) <= 0) return 0;
    return (p.revents & (rdhup | POLLHUP | POLLERR | POLLNVAL)) != 0;
}
