/* 01-keep-alive-network-thread.c - a network thread kept alive by a source (issue 11, example 1).
 *
 * Pattern: AFNetworking's networkRequestThread. One thread runs its loop forever; a version-0
 * source that is never signalled (the "port" AFNetworking adds) keeps the default mode from
 * being empty, so rl_run() waits for work instead of returning RL_RUN_FINISHED. Other threads
 * queue requests onto it with rl_loop_perform() + rl_loop_wakeup(), each in the modes it names;
 * the network thread opens a non-blocking TCP connection to 127.0.0.1 per request and drives it
 * with fd sources in those modes. An echo server runs on the main thread's loop.
 *
 * What to watch for:
 *   - every request runs on the network thread and gets its reply over a real socket;
 *   - a request queued only in a mode the thread never runs stays queued, and is dropped
 *     without running when the thread exits (its context's release still runs, once);
 *   - shutting down is: invalidate the keep-alive source; rl_run() then returns RL_RUN_FINISHED
 *     as soon as the default mode is empty, which proves that no connection's source was left
 *     behind; the thread exits and its loop's epoll set, eventfd and timerfd are closed;
 *   - at the end the process has the fds it had before, and none of the threads it started.
 */
#include <crunloop.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "01-keep-alive-network-thread: check failed at line %d: %s: ",    \
                    __LINE__, #cond);                                                         \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

enum { CLIENT_THREADS = 3, REQUESTS_PER_CLIENT = 4, MAX_LINE = 64 };

static const char *const NEVER_RUN_MODE = "com.example.network.never-run";

/* The number of entries of a /proc folder (open fds: minus the folder's own). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL, "opendir %s: %s", dir, strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - (strcmp(dir, "/proc/self/fd") == 0);
}

/* The number of threads of this process named name (pthread_setname_np). By name, because
 * sanitizer runtimes start threads of their own. */
static int count_threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL, "opendir: %s", strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;   /* the thread is gone */
        if (fgets(comm, sizeof comm, f) != NULL) comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        n += strcmp(comm, name) == 0;
    }
    closedir(d);
    return n;
}

/* ---- The echo server, on the main thread's loop -------------------------------------------- */

static atomic_int server_open;       /* connections the server holds; main thread only */
static atomic_int clients_finished;  /* client threads that got all their replies */

/* The main thread stops its run once every client thread is done and every connection closed. */
static void stop_main_if_done(void)
{
    if (atomic_load(&clients_finished) == CLIENT_THREADS && atomic_load(&server_open) == 0)
        rl_loop_stop(rl_loop_get_current());
}

static void stop_main_if_done_block(void *arg)
{
    (void)arg;
    stop_main_if_done();
}

typedef struct { char line[MAX_LINE]; size_t used; } server_conn_t;

static void free_info(const void *info) { free((void *)info); }

/* Reads a line, answers it in upper case, half-closes; closes when the client has closed. */
static void server_readable(rl_source_t *source, int fd, unsigned events, void *info)
{
    (void)events;
    server_conn_t *conn = info;
    ssize_t n = read(fd, conn->line + conn->used, sizeof conn->line - 1 - conn->used);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n > 0) {
        conn->used += (size_t)n;
        conn->line[conn->used] = '\0';
        if (strchr(conn->line, '\n') != NULL) {
            for (char *p = conn->line; *p; p++) *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
            /* A few bytes into a fresh loopback socket's empty buffer: written whole. */
            CHECK(write(fd, conn->line, conn->used) == (ssize_t)conn->used, "server write");
            CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown: %s", strerror(errno));
        }
        CHECK(conn->used < sizeof conn->line - 1, "request line too long");
        return;
    }
    /* EOF or an error: the client is done. Invalidate before closing (crunloop.h). */
    rl_source_invalidate(source);
    close(fd);
    atomic_fetch_sub(&server_open, 1);
    stop_main_if_done();
}

static void server_accept(rl_source_t *source, int listener, unsigned events, void *info)
{
    (void)source, (void)events, (void)info;
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        CHECK(errno == EAGAIN || errno == EINTR || errno == ECONNABORTED, "accept: %s", strerror(errno));
        return;
    }
    server_conn_t *conn = calloc(1, sizeof *conn);
    CHECK(conn != NULL, "out of memory");
    rl_context_t context = { .info = conn, .release = free_info };
    rl_source_t *s = rl_source_create_fd(fd, RL_FD_READABLE, 0, server_readable, &context);
    CHECK(s != NULL, "rl_source_create_fd: %s", strerror(errno));
    CHECK(rl_loop_add_source(rl_loop_get_current(), s, RL_DEFAULT_MODE) == 0, "add server conn");
    rl_release(s);
    atomic_fetch_add(&server_open, 1);
}

/* ---- Requests, run on the network thread --------------------------------------------------- */

typedef struct {
    int id;
    const char *mode;                 /* where the request and its fd source live */
    struct sockaddr_in server;
    char request[MAX_LINE], reply[MAX_LINE];
    size_t reply_used;
    bool sent, ran_on_network_thread;
    /* completion: the requesting thread waits on done */
    pthread_mutex_t *lock;
    pthread_cond_t *cond;
    bool done;
} request_t;

static rl_loop_t *network_loop;       /* set before any client thread starts */

static void request_finish(request_t *req)
{
    pthread_mutex_lock(req->lock);
    req->done = true;
    pthread_cond_broadcast(req->cond);
    pthread_mutex_unlock(req->lock);
}

/* The connection's fd source: writable once connected (send the request), then readable until
 * the server's half-close (the reply is complete). Level-triggered: each state asks only for
 * the event it needs. */
static void request_io(rl_source_t *source, int fd, unsigned events, void *info)
{
    request_t *req = info;
    req->ran_on_network_thread = rl_loop_is_current(network_loop);
    if (!req->sent) {
        int err = 0;
        socklen_t len = sizeof err;
        CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0,
              "request %d: connect: %s", req->id, strerror(err));
        size_t n = strlen(req->request);
        CHECK(write(fd, req->request, n) == (ssize_t)n, "request %d: write", req->id);
        req->sent = true;
        CHECK(rl_source_set_fd_events(source, RL_FD_READABLE) == 0, "set events");
        return;
    }
    (void)events;
    ssize_t n = read(fd, req->reply + req->reply_used, sizeof req->reply - 1 - req->reply_used);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    CHECK(n >= 0, "request %d: read: %s", req->id, strerror(errno));
    if (n > 0) {
        req->reply_used += (size_t)n;
        req->reply[req->reply_used] = '\0';
        return;
    }
    rl_source_invalidate(source);   /* before close: never the other way round */
    close(fd);
    request_finish(req);
}

/* The queued block: runs on the network thread, in one of the request's modes. */
static void request_start(void *arg)
{
    request_t *req = arg;
    CHECK(rl_loop_is_current(network_loop), "request %d not on the network thread", req->id);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    int r = connect(fd, (struct sockaddr *)&req->server, sizeof req->server);
    CHECK(r == 0 || errno == EINPROGRESS, "connect: %s", strerror(errno));
    rl_context_t context = { .info = req };
    rl_source_t *s = rl_source_create_fd(fd, RL_FD_WRITABLE, 0, request_io, &context);
    CHECK(s != NULL, "rl_source_create_fd: %s", strerror(errno));
    CHECK(rl_loop_add_source(rl_loop_get_current(), s, req->mode) == 0, "add request source");
    rl_release(s);
}

/* ---- The network thread -------------------------------------------------------------------- */

static rl_source_t *keep_alive;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cond = PTHREAD_COND_INITIALIZER;

static void *network_thread_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "net-requests");
    pthread_mutex_lock(&start_lock);
    network_loop = rl_retain(rl_loop_get_current());   /* kept past the thread, to check it */
    CHECK(network_loop != NULL, "rl_loop_get_current: %s", strerror(errno));
    /* The keep-alive: a source nobody signals. Without it, rl_run() would return at once. */
    rl_source_context_t nothing = { 0 };
    keep_alive = rl_source_create(0, &nothing);
    CHECK(keep_alive != NULL && rl_loop_add_source(network_loop, keep_alive, RL_DEFAULT_MODE) == 0,
          "keep-alive source");
    pthread_cond_broadcast(&start_cond);
    pthread_mutex_unlock(&start_lock);

    /* Forever, until the default mode is empty (or someone stops it). */
    int result = rl_run();
    return (void *)(intptr_t)result;
}

/* The last block: drop the keep-alive; the run finishes once nothing else is in the mode. */
static void network_shutdown(void *arg)
{
    (void)arg;
    rl_source_invalidate(keep_alive);
}

/* ---- Client threads ------------------------------------------------------------------------ */

typedef struct { int index; struct sockaddr_in server; } client_t;

static void *client_thread_main(void *arg)
{
    client_t *client = arg;
    pthread_setname_np(pthread_self(), "net-client");
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    request_t reqs[REQUESTS_PER_CLIENT];
    for (int i = 0; i < REQUESTS_PER_CLIENT; i++) {
        request_t *req = &reqs[i];
        *req = (request_t){ .id = client->index * 100 + i, .server = client->server,
                            .lock = &lock, .cond = &cond };
        /* AFNetworking's default is the common modes; some of these name the default mode. */
        req->mode = i % 2 == 0 ? RL_COMMON_MODES : RL_DEFAULT_MODE;
        snprintf(req->request, sizeof req->request, "get /item/%d\n", req->id);
        CHECK(rl_loop_perform(network_loop, req->mode, request_start, req) == 0, "perform");
        rl_loop_wakeup(network_loop);   /* rl_loop_perform does not wake the loop by itself */
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < REQUESTS_PER_CLIENT; i++)
        while (!reqs[i].done) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < REQUESTS_PER_CLIENT; i++) {
        char want[MAX_LINE];
        snprintf(want, sizeof want, "GET /ITEM/%d\n", reqs[i].id);
        CHECK(strcmp(reqs[i].reply, want) == 0, "request %d: reply \"%s\"", reqs[i].id, reqs[i].reply);
        CHECK(reqs[i].ran_on_network_thread, "request %d: I/O not on the network thread", reqs[i].id);
    }
    printf("client %d: %d replies, all from the network thread\n", client->index, REQUESTS_PER_CLIENT);
    pthread_mutex_destroy(&lock);
    pthread_cond_destroy(&cond);
    atomic_fetch_add(&clients_finished, 1);
    /* Tell the main thread's loop (a block, so that it runs in a pass even if it sleeps). */
    CHECK(rl_loop_perform(rl_loop_get_main(), RL_DEFAULT_MODE, stop_main_if_done_block, NULL) == 0,
          "perform on main");
    rl_loop_wakeup(rl_loop_get_main());
    return NULL;
}

/* A request queued in a mode the network thread never runs: counts what happens to it. */
static atomic_int parked_performed, parked_released;
static void parked_perform(void *info) { (void)info; atomic_fetch_add(&parked_performed, 1); }
static void parked_release(const void *info) { (void)info; atomic_fetch_add(&parked_released, 1); }

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rl_loop_t *main_loop = rl_loop_get_current();   /* the main loop's own fds exist from here */
    CHECK(main_loop != NULL, "rl_loop_get_current: %s", strerror(errno));
    int fds_before = count_entries("/proc/self/fd");

    /* The server: a listener on an ephemeral port of 127.0.0.1, watched by the main loop. */
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(listener >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t addr_len = sizeof addr;
    CHECK(bind(listener, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(listener, 64) == 0 &&
          getsockname(listener, (struct sockaddr *)&addr, &addr_len) == 0, "listen: %s", strerror(errno));
    rl_source_t *accepting = rl_source_create_fd(listener, RL_FD_READABLE, 0, server_accept, NULL);
    CHECK(accepting != NULL && rl_loop_add_source(main_loop, accepting, RL_DEFAULT_MODE) == 0, "listener source");
    printf("server: listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));

    pthread_t network;
    pthread_mutex_lock(&start_lock);
    CHECK(pthread_create(&network, NULL, network_thread_main, NULL) == 0, "pthread_create");
    while (network_loop == NULL) pthread_cond_wait(&start_cond, &start_lock);
    pthread_mutex_unlock(&start_lock);

    rl_block_context_t parked = { .perform = parked_perform, .release = parked_release };
    CHECK(rl_loop_perform_context(network_loop, NEVER_RUN_MODE, &parked) == 0, "perform_context");
    rl_loop_wakeup(network_loop);

    pthread_t clients[CLIENT_THREADS];
    client_t client_args[CLIENT_THREADS];
    for (int i = 0; i < CLIENT_THREADS; i++) {
        client_args[i] = (client_t){ .index = i, .server = addr };
        CHECK(pthread_create(&clients[i], NULL, client_thread_main, &client_args[i]) == 0, "pthread_create");
    }

    /* Serve until every client is done and every connection closed (stop_main_if_done). */
    double deadline = rl_time_now() + 20;
    while (atomic_load(&clients_finished) < CLIENT_THREADS || atomic_load(&server_open) > 0) {
        int r = rl_run_in_mode(RL_DEFAULT_MODE, deadline - rl_time_now(), false);
        CHECK(r == RL_RUN_STOPPED, "main run returned %d (timed out?)", r);
    }
    for (int i = 0; i < CLIENT_THREADS; i++) pthread_join(clients[i], NULL);
    CHECK(atomic_load(&parked_performed) == 0, "the parked request ran in a mode never run");

    /* Shut the network thread down: queue the last block, in the mode it runs, and join. */
    CHECK(rl_loop_perform(network_loop, RL_DEFAULT_MODE, network_shutdown, NULL) == 0, "perform");
    rl_loop_wakeup(network_loop);
    void *result;
    pthread_join(network, &result);
    CHECK((intptr_t)result == RL_RUN_FINISHED,
          "rl_run returned %d, not RL_RUN_FINISHED: something was left in the default mode",
          (int)(intptr_t)result);
    printf("network thread: rl_run() returned RL_RUN_FINISHED once the keep-alive was gone\n");
    CHECK(atomic_load(&parked_performed) == 0 && atomic_load(&parked_released) == 1,
          "parked request: performed %d, released %d (want 0, 1)",
          atomic_load(&parked_performed), atomic_load(&parked_released));
    printf("parked request (mode %s): dropped unrun at thread exit, released once\n", NEVER_RUN_MODE);
    /* The dead loop refuses new work (crunloop.h: adding to a dead loop is -EINVAL). */
    CHECK(rl_loop_perform(network_loop, RL_DEFAULT_MODE, network_shutdown, NULL) == -EINVAL,
          "a dead loop took work");
    rl_release(network_loop);
    rl_release(keep_alive);

    rl_source_invalidate(accepting);
    rl_release(accepting);
    close(listener);

    CHECK(count_entries("/proc/self/fd") == fds_before, "%d fds open, %d before",
          count_entries("/proc/self/fd"), fds_before);
    /* A joined thread may stay listed for a moment while the kernel finishes its exit. */
    int left = 0;
    for (int tries = 0; (left = count_threads_named("net-requests") + count_threads_named("net-client")) > 0 &&
                        tries < 100; tries++)
        usleep(10000);
    CHECK(left == 0, "%d of the threads started are still there", left);
    printf("clean: %d fds open as before, no thread of the example left\n", fds_before);
    return 0;
}
