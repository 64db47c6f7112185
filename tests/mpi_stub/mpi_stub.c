/*
 * A stand-in libmpi for inferperf's tests, so multi-process MPI tests run where Open MPI is
 * not installed (CI downloads nothing).
 *
 * It exports the Open MPI-flavoured symbols inferperf's bindings resolve (src/mpi/ffi.rs):
 * the MPI_* functions, and objects named like Open MPI's predefined handles, whose addresses
 * serve as the handles.
 *
 * The world comes from the environment:
 *   INFERPERF_MPISTUB_RANK, INFERPERF_MPISTUB_SIZE  this process's rank and the world size
 *   INFERPERF_MPISTUB_DIR                          where rank 0 listens (Unix socket)
 *   INFERPERF_MPISTUB_IO_TIMEOUT_MS                send/receive timeout (default 60000 ms)
 * Without them the process is a world of one.
 *
 * Every collective goes through rank 0: the others send their part to rank 0, which
 * forwards what a root other than itself needs. The "nonblocking" calls do all their
 * socket I/O before returning, so MPI_Test only reports completion. A peer that closed its
 * socket (it died) makes the call fail at once with MPI_ERR_OTHER.
 *
 * Wire format, each message: op (1 byte), 3 zero bytes, root (u32), length (u64), then the
 * bytes; all in host order (both ends run on this machine).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* Error codes, Open MPI's numbering. */
#define ERR_TYPE 3
#define ERR_COMM 5
#define ERR_REQUEST 7
#define ERR_ROOT 8
#define ERR_ARG 13
#define ERR_TRUNCATE 15
#define ERR_OTHER 16
#define ERR_INTERN 17

/* A predefined object; for datatypes `size` is the element size in bytes. */
struct stub_object {
    int size;
};

EXPORT struct stub_object ompi_mpi_comm_world = {0};
EXPORT struct stub_object ompi_mpi_byte = {1};
EXPORT struct stub_object ompi_mpi_int = {4};
EXPORT struct stub_object ompi_mpi_uint64_t = {8};
EXPORT struct stub_object ompi_mpi_errors_return = {0};
EXPORT struct stub_object ompi_request_null = {0};
/* Every started request points here until MPI_Test reports it. */
static struct stub_object completed_request = {0};

typedef struct stub_object *handle;

static int world_rank = 0;
static int world_size = 1;
static int initialized = 0;
static int finalized = 0;
static long collectives = 0;
/* Rank 0: one socket per other rank (index = rank); others: fds[0] is rank 0. */
static int *fds = NULL;
static char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

struct header {
    uint8_t op;
    uint8_t pad[3];
    uint32_t root;
    uint64_t len;
};

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return ERR_OTHER;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) /* 0: the peer closed (died); <0: timeout or reset */
            return ERR_OTHER;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_msg(int fd, char op, int root, const void *buf, size_t len) {
    struct header h = {(uint8_t)op, {0, 0, 0}, (uint32_t)root, len};
    int rc = write_all(fd, &h, sizeof h);
    return rc ? rc : write_all(fd, buf, len);
}

/* Reads a header, checks it is `op` for `root`, and returns the length in *len. */
static int recv_header(int fd, char op, int root, size_t *len) {
    struct header h;
    int rc = read_all(fd, &h, sizeof h);
    if (rc)
        return rc;
    if (h.op != (uint8_t)op || h.root != (uint32_t)root) {
        fprintf(stderr, "mpi_stub: rank %d expected op %c root %d, a peer sent op %c root %u\n",
                world_rank, op, root, h.op, h.root);
        return ERR_INTERN;
    }
    *len = h.len;
    return 0;
}

/* Receives exactly `len` bytes of message `op` into buf. */
static int recv_msg(int fd, char op, int root, void *buf, size_t len) {
    size_t got;
    int rc = recv_header(fd, op, root, &got);
    if (rc)
        return rc;
    if (got != len)
        return ERR_TRUNCATE;
    return read_all(fd, buf, len);
}

static void set_timeouts(int fd, int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int listen_for_peers(struct sockaddr_un *addr, int timeout_ms) {
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (lfd < 0)
        return ERR_OTHER;
    unlink(addr->sun_path);
    if (bind(lfd, (struct sockaddr *)addr, sizeof *addr) || listen(lfd, world_size)) {
        close(lfd);
        return ERR_OTHER;
    }
    set_timeouts(lfd, timeout_ms); /* bounds accept() too */
    for (int i = 1; i < world_size; i++) {
        int fd = accept(lfd, NULL, NULL);
        uint32_t peer;
        if (fd < 0) {
            close(lfd);
            return ERR_OTHER;
        }
        set_timeouts(fd, timeout_ms);
        if (read_all(fd, &peer, sizeof peer) || peer == 0 || peer >= (uint32_t)world_size ||
            fds[peer] >= 0) {
            close(fd);
            close(lfd);
            return ERR_OTHER;
        }
        fds[peer] = fd;
    }
    close(lfd);
    return 0;
}

static int connect_to_root(struct sockaddr_un *addr, int timeout_ms) {
    struct timespec pause = {0, 10 * 1000 * 1000}; /* 10 ms between attempts */
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0)
            return ERR_OTHER;
        if (connect(fd, (struct sockaddr *)addr, sizeof *addr) == 0) {
            uint32_t me = (uint32_t)world_rank;
            set_timeouts(fd, timeout_ms);
            fds[0] = fd;
            return write_all(fd, &me, sizeof me);
        }
        close(fd);
        nanosleep(&pause, NULL);
    }
    return ERR_OTHER;
}

static int connect_world(void) {
    const char *dir = getenv("INFERPERF_MPISTUB_DIR");
    int timeout_ms = env_int("INFERPERF_MPISTUB_IO_TIMEOUT_MS", 60000);
    struct sockaddr_un addr;
    if (!dir || !*dir) {
        fprintf(stderr, "mpi_stub: INFERPERF_MPISTUB_DIR is not set\n");
        return ERR_ARG;
    }
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if ((size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/mpistub.sock", dir) >=
        sizeof addr.sun_path) {
        fprintf(stderr, "mpi_stub: INFERPERF_MPISTUB_DIR is too long for a socket path\n");
        return ERR_ARG;
    }
    fds = malloc(sizeof(int) * (size_t)world_size);
    if (!fds)
        return ERR_OTHER;
    for (int i = 0; i < world_size; i++)
        fds[i] = -1;
    if (world_rank == 0) {
        memcpy(socket_path, addr.sun_path, sizeof socket_path);
        return listen_for_peers(&addr, timeout_ms);
    }
    return connect_to_root(&addr, timeout_ms);
}

static void close_world(void) {
    if (fds) {
        for (int i = 0; i < world_size; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        free(fds);
        fds = NULL;
    }
    if (socket_path[0])
        unlink(socket_path);
}

EXPORT int MPI_Initialized(int *flag) {
    *flag = initialized;
    return 0;
}

EXPORT int MPI_Finalized(int *flag) {
    *flag = finalized;
    return 0;
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    (void)argc;
    (void)argv;
    if (initialized)
        return ERR_OTHER;
    world_size = env_int("INFERPERF_MPISTUB_SIZE", 1);
    world_rank = env_int("INFERPERF_MPISTUB_RANK", 0);
    if (world_size < 1 || world_rank < 0 || world_rank >= world_size) {
        fprintf(stderr, "mpi_stub: rank %d of size %d is not a valid world\n", world_rank,
                world_size);
        return ERR_ARG;
    }
    if (world_size > 1) {
        int rc = connect_world();
        if (rc)
            return rc;
    }
    initialized = 1;
    *provided = required;
    return 0;
}

EXPORT int MPI_Init(int *argc, char ***argv) {
    int provided;
    return MPI_Init_thread(argc, argv, 0, &provided);
}

EXPORT int MPI_Finalize(void) {
    close_world();
    finalized = 1;
    return 0;
}

EXPORT int MPI_Abort(handle comm, int code) {
    (void)comm;
    fflush(stdout);
    fflush(stderr);
    close_world();
    _exit(code);
}

EXPORT int MPI_Comm_set_errhandler(handle comm, handle errhandler) {
    return comm == &ompi_mpi_comm_world && errhandler == &ompi_mpi_errors_return ? 0 : ERR_ARG;
}

EXPORT int MPI_Comm_rank(handle comm, int *rank) {
    if (comm != &ompi_mpi_comm_world)
        return ERR_COMM;
    *rank = world_rank;
    return 0;
}

EXPORT int MPI_Comm_size(handle comm, int *size) {
    if (comm != &ompi_mpi_comm_world)
        return ERR_COMM;
    *size = world_size;
    return 0;
}

/* Checks the common arguments and counts the collective. */
static int begin(handle comm, int root, handle *request) {
    *request = &ompi_request_null;
    if (!initialized || finalized)
        return ERR_OTHER;
    if (comm != &ompi_mpi_comm_world)
        return ERR_COMM;
    if (root < 0 || root >= world_size)
        return ERR_ROOT;
    collectives++;
    return 0;
}

static int finish(int rc, handle *request) {
    if (rc == 0)
        *request = &completed_request;
    return rc;
}

static long type_size(handle type) {
    if (type == &ompi_mpi_byte || type == &ompi_mpi_int || type == &ompi_mpi_uint64_t)
        return type->size;
    return -1;
}

static int barrier(void) {
    int rc = 0;
    if (world_rank != 0) {
        rc = send_msg(fds[0], 'B', 0, NULL, 0);
        return rc ? rc : recv_msg(fds[0], 'B', 0, NULL, 0);
    }
    for (int r = 1; r < world_size && !rc; r++)
        rc = recv_msg(fds[r], 'B', 0, NULL, 0);
    for (int r = 1; r < world_size && !rc; r++)
        rc = send_msg(fds[r], 'B', 0, NULL, 0);
    return rc;
}

EXPORT int MPI_Ibarrier(handle comm, handle *request) {
    int rc = begin(comm, 0, request);
    return finish(rc ? rc : barrier(), request);
}

static int bcast(void *buf, size_t len, int root) {
    int rc = 0;
    if (world_rank != 0) {
        if (world_rank == root)
            return send_msg(fds[0], 'C', root, buf, len);
        return recv_msg(fds[0], 'C', root, buf, len);
    }
    if (root != 0)
        rc = recv_msg(fds[root], 'C', root, buf, len);
    for (int r = 1; r < world_size && !rc; r++)
        if (r != root)
            rc = send_msg(fds[r], 'C', root, buf, len);
    return rc;
}

EXPORT int MPI_Ibcast(void *buf, int count, handle type, int root, handle comm,
                      handle *request) {
    long size = type_size(type);
    int rc = begin(comm, root, request);
    if (rc)
        return rc;
    if (size < 0 || count < 0)
        return size < 0 ? ERR_TYPE : ERR_ARG;
    return finish(bcast(buf, (size_t)count * (size_t)size, root), request);
}

/* Gather of equal blocks of `block` bytes: through rank 0, then on to root. */
static int gather(const void *sbuf, size_t block, void *rbuf, int root) {
    int rc = 0;
    char *all;
    if (world_rank != 0) {
        rc = send_msg(fds[0], 'G', root, sbuf, block);
        if (rc || world_rank != root)
            return rc;
        return recv_msg(fds[0], 'G', root, rbuf, block * (size_t)world_size);
    }
    all = root == 0 ? rbuf : malloc(block * (size_t)world_size + 1);
    if (!all)
        return ERR_OTHER;
    memcpy(all, sbuf, block);
    for (int r = 1; r < world_size && !rc; r++)
        rc = recv_msg(fds[r], 'G', root, all + block * (size_t)r, block);
    if (root != 0) {
        if (!rc)
            rc = send_msg(fds[root], 'G', root, all, block * (size_t)world_size);
        free(all);
    }
    return rc;
}

EXPORT int MPI_Igather(const void *sbuf, int scount, handle stype, void *rbuf, int rcount,
                       handle rtype, int root, handle comm, handle *request) {
    long ssize = type_size(stype), rsize = type_size(rtype);
    int rc = begin(comm, root, request);
    if (rc)
        return rc;
    if (ssize < 0 || rsize < 0)
        return ERR_TYPE;
    if (scount < 0 || (world_rank == root && (long)scount * ssize != (long)rcount * rsize))
        return ERR_ARG;
    return finish(gather(sbuf, (size_t)scount * (size_t)ssize, rbuf, root), request);
}

/* Root's side of a variable gather: rank r's bytes from `fd` (or `own`) into place. */
static int place_part(int fd, int r, const void *own, size_t own_len, char *rbuf,
                      const int *counts, const int *displs, long elem, int root) {
    size_t want = (size_t)counts[r] * (size_t)elem;
    char *at = rbuf + (size_t)displs[r] * (size_t)elem;
    if (fd < 0) {
        if (own_len != want)
            return ERR_TRUNCATE;
        memcpy(at, own, own_len);
        return 0;
    }
    return recv_msg(fd, 'V', root, at, want);
}

/* Rank 0 when root is another rank: every rank's part, own included, forwarded in order. */
static int forward_parts(const void *own, size_t own_len, int root) {
    int rc = send_msg(fds[root], 'V', root, own, own_len);
    for (int r = 1; r < world_size && !rc; r++) {
        size_t len;
        char *part;
        rc = recv_header(fds[r], 'V', root, &len);
        if (rc)
            break;
        part = malloc(len + 1);
        if (!part)
            return ERR_OTHER;
        rc = read_all(fds[r], part, len);
        if (!rc)
            rc = send_msg(fds[root], 'V', root, part, len);
        free(part);
    }
    return rc;
}

static int gatherv(const void *sbuf, size_t len, char *rbuf, const int *counts,
                   const int *displs, long elem, int root) {
    int rc = 0;
    if (world_rank == 0 && root == 0) {
        for (int r = 0; r < world_size && !rc; r++)
            rc = place_part(r == 0 ? -1 : fds[r], r, sbuf, len, rbuf, counts, displs, elem,
                            root);
        return rc;
    }
    if (world_rank == 0)
        return forward_parts(sbuf, len, root);
    rc = send_msg(fds[0], 'V', root, sbuf, len);
    if (rc || world_rank != root)
        return rc;
    /* Root: rank 0 forwards every part in rank order, this rank's own included. */
    for (int r = 0; r < world_size && !rc; r++)
        rc = place_part(fds[0], r, NULL, 0, rbuf, counts, displs, elem, root);
    return rc;
}

EXPORT int MPI_Igatherv(const void *sbuf, int scount, handle stype, void *rbuf,
                        const int *rcounts, const int *displs, handle rtype, int root,
                        handle comm, handle *request) {
    long ssize = type_size(stype), rsize = type_size(rtype);
    int rc = begin(comm, root, request);
    if (rc)
        return rc;
    if (ssize < 0 || rsize < 0)
        return ERR_TYPE;
    if (scount < 0 || (world_rank == root && (!rcounts || !displs)))
        return ERR_ARG;
    return finish(gatherv(sbuf, (size_t)scount * (size_t)ssize, rbuf, rcounts, displs, rsize,
                          root),
                  request);
}

EXPORT int MPI_Test(handle *request, int *flag, void *status) {
    (void)status;
    if (*request != &completed_request && *request != &ompi_request_null)
        return ERR_REQUEST;
    *request = &ompi_request_null;
    *flag = 1;
    return 0;
}

EXPORT int MPI_Get_processor_name(char *name, int *len) {
    if (gethostname(name, 256) != 0)
        snprintf(name, 256, "localhost");
    name[255] = '\0';
    *len = (int)strlen(name);
    return 0;
}

EXPORT int MPI_Error_string(int code, char *text, int *len) {
    const char *s;
    switch (code) {
    case ERR_OTHER:
        s = "stub: lost the connection to a peer rank (it died, hung or called MPI_Abort)";
        break;
    case ERR_INTERN:
        s = "stub: the ranks called different collectives";
        break;
    case ERR_TRUNCATE:
        s = "stub: a peer sent a different number of bytes than expected";
        break;
    default:
        s = "stub: invalid argument";
    }
    *len = snprintf(text, 256, "%s", s);
    return 0;
}

EXPORT int MPI_Get_library_version(char *version, int *len) {
    *len = snprintf(version, 256, "inferperf MPI stand-in (Open MPI flavour)");
    return 0;
}

/* Collectives this process has started, for tests. */
EXPORT int inferperf_stub_collectives(void) { return (int)collectives; }
