/*
 * A stand-in for libtritonserver.so, used only by inferperf's tests of the C API service
 * kind. It implements the entry points inferperf binds, with two models:
 *   identity_fp32  INPUT0 FP32 [16] -> OUTPUT0 (a copy), max_batch_size 0
 *   repeat_int32   decoupled: IN INT32 [1] = n -> n responses OUT INT32 [1] = 0..n-1,
 *                  then a final flag without a response
 * Requests are answered from one server thread, as Triton answers from its own threads.
 *
 * Build switches (-D...):
 *   STUB_API_MAJOR / STUB_API_MINOR  reported API version (default 1.34)
 *   STUB_FAIL_INFER_AFTER=n          InferAsync fails from the (n+1)-th call on
 *   STUB_OMIT_PRIORITY               leave out InferenceRequestSetPriorityUInt64
 *   STUB_SERVE_DELAY_US=n            the server thread waits n microseconds before each request
 *
 * Counters for the tests (exported): stub_infer_count (accepted requests),
 * stub_response_count (responses with outputs), stub_max_inflight (most requests accepted
 * and not yet given their final callback at once), stub_unload_count.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef STUB_API_MAJOR
#define STUB_API_MAJOR 1
#endif
#ifndef STUB_API_MINOR
#define STUB_API_MINOR 34
#endif

#define EXPORT __attribute__((visibility("default")))
#define MAX_TENSORS 4
#define MAX_DIMS 8

typedef struct TRITONSERVER_Error { int code; char *msg; } TRITONSERVER_Error;
typedef struct TRITONSERVER_Message { char *json; size_t len; } TRITONSERVER_Message;
typedef struct TRITONSERVER_ServerOptions { char repo[1024]; } TRITONSERVER_ServerOptions;
typedef struct TRITONSERVER_InferenceTrace TRITONSERVER_InferenceTrace;
struct TRITONSERVER_ResponseAllocator;
struct TRITONSERVER_InferenceRequest;
struct TRITONSERVER_InferenceResponse;

typedef TRITONSERVER_Error *(*alloc_fn_t)(struct TRITONSERVER_ResponseAllocator *, const char *,
                                          size_t, int, int64_t, void *, void **, void **, int *,
                                          int64_t *);
typedef TRITONSERVER_Error *(*release_fn_t)(struct TRITONSERVER_ResponseAllocator *, void *,
                                            void *, size_t, int, int64_t);
typedef TRITONSERVER_Error *(*start_fn_t)(struct TRITONSERVER_ResponseAllocator *, void *);
typedef void (*request_release_fn_t)(struct TRITONSERVER_InferenceRequest *, uint32_t, void *);
typedef void (*response_fn_t)(struct TRITONSERVER_InferenceResponse *, uint32_t, void *);

typedef struct TRITONSERVER_ResponseAllocator {
  alloc_fn_t alloc;
  release_fn_t release;
} TRITONSERVER_ResponseAllocator;

typedef struct {
  char name[64];
  int datatype;
  int64_t shape[MAX_DIMS];
  uint64_t dims;
  char *data;
  size_t size;
  void *buffer_userp;
} Tensor;

typedef struct TRITONSERVER_InferenceRequest {
  char model[64];
  Tensor inputs[MAX_TENSORS];
  int n_inputs;
  int n_outputs;
  uint32_t flags;
  uint64_t correlation_id;
  request_release_fn_t release_fn;
  void *release_userp;
  TRITONSERVER_ResponseAllocator *allocator;
  void *allocator_userp;
  response_fn_t response_fn;
  void *response_userp;
  struct TRITONSERVER_InferenceRequest *next;
} TRITONSERVER_InferenceRequest;

typedef struct TRITONSERVER_InferenceResponse {
  TRITONSERVER_Error *error;
  Tensor outputs[MAX_TENSORS];
  int n_outputs;
  TRITONSERVER_ResponseAllocator *allocator;
} TRITONSERVER_InferenceResponse;

typedef struct TRITONSERVER_Server {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  TRITONSERVER_InferenceRequest *head, *tail;
  bool stopping;
  uint64_t success_count, success_ns;
} TRITONSERVER_Server;

static uint64_t infer_calls;    /* every InferAsync call */
static uint64_t infer_accepted; /* the ones that were queued */
static uint64_t unload_calls;
static uint64_t responses_sent; /* responses with outputs delivered */
static int64_t in_flight;       /* accepted requests whose final callback has not come */
static int64_t max_in_flight;

EXPORT uint64_t stub_response_count(void) { return __atomic_load_n(&responses_sent, __ATOMIC_SEQ_CST); }
EXPORT uint64_t stub_max_inflight(void) { return (uint64_t)__atomic_load_n(&max_in_flight, __ATOMIC_SEQ_CST); }

/* A request is in flight from its acceptance until its final callback is made. */
static void enter_flight(void) {
  int64_t now = __atomic_add_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
  int64_t seen = __atomic_load_n(&max_in_flight, __ATOMIC_SEQ_CST);
  while (now > seen &&
         !__atomic_compare_exchange_n(&max_in_flight, &seen, now, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
  }
}
static void leave_flight(void) { __atomic_sub_fetch(&in_flight, 1, __ATOMIC_SEQ_CST); }

EXPORT uint64_t stub_infer_count(void) { return __atomic_load_n(&infer_accepted, __ATOMIC_SEQ_CST); }
EXPORT uint64_t stub_unload_count(void) { return __atomic_load_n(&unload_calls, __ATOMIC_SEQ_CST); }

static TRITONSERVER_Error *err(int code, const char *msg) {
  TRITONSERVER_Error *e = malloc(sizeof *e);
  e->code = code;
  e->msg = strdup(msg);
  return e;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static TRITONSERVER_Message *message(const char *json) {
  TRITONSERVER_Message *m = malloc(sizeof *m);
  m->json = strdup(json);
  m->len = strlen(json);
  return m;
}

static bool known_model(const char *name) {
  return strcmp(name, "identity_fp32") == 0 || strcmp(name, "repeat_int32") == 0;
}

/* ---- errors, messages, version ---- */
EXPORT TRITONSERVER_Error *TRITONSERVER_ApiVersion(uint32_t *major, uint32_t *minor) {
  *major = STUB_API_MAJOR;
  *minor = STUB_API_MINOR;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ErrorNew(int code, const char *msg) { return err(code, msg); }
EXPORT int TRITONSERVER_ErrorCode(TRITONSERVER_Error *e) { return e->code; }
EXPORT const char *TRITONSERVER_ErrorMessage(TRITONSERVER_Error *e) { return e->msg; }
EXPORT void TRITONSERVER_ErrorDelete(TRITONSERVER_Error *e) {
  if (e) {
    free(e->msg);
    free(e);
  }
}
EXPORT TRITONSERVER_Error *TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message *m,
                                                               const char **base, size_t *size) {
  *base = m->json;
  *size = m->len;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_MessageDelete(TRITONSERVER_Message *m) {
  free(m->json);
  free(m);
  return NULL;
}

/* ---- allocator ---- */
EXPORT TRITONSERVER_Error *TRITONSERVER_ResponseAllocatorNew(TRITONSERVER_ResponseAllocator **a,
                                                             alloc_fn_t alloc,
                                                             release_fn_t release,
                                                             start_fn_t start) {
  (void)start;
  *a = malloc(sizeof **a);
  (*a)->alloc = alloc;
  (*a)->release = release;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ResponseAllocatorDelete(TRITONSERVER_ResponseAllocator *a) {
  free(a);
  return NULL;
}

/* ---- options ---- */
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsNew(TRITONSERVER_ServerOptions **o) {
  *o = calloc(1, sizeof **o);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsDelete(TRITONSERVER_ServerOptions *o) {
  free(o);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetModelRepositoryPath(
    TRITONSERVER_ServerOptions *o, const char *path) {
  snprintf(o->repo, sizeof o->repo, "%s", path);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(
    TRITONSERVER_ServerOptions *o, int gpu, uint64_t size) {
  (void)o, (void)gpu, (void)size;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetLogVerbose(TRITONSERVER_ServerOptions *o, int l) {
  (void)o, (void)l;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetLogInfo(TRITONSERVER_ServerOptions *o, bool b) {
  (void)o, (void)b;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetBackendDirectory(TRITONSERVER_ServerOptions *o,
                                                                         const char *d) {
  (void)o, (void)d;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetRepoAgentDirectory(
    TRITONSERVER_ServerOptions *o, const char *d) {
  (void)o, (void)d;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetStrictModelConfig(TRITONSERVER_ServerOptions *o,
                                                                          bool b) {
  (void)o, (void)b;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(
    TRITONSERVER_ServerOptions *o, double cc) {
  (void)o, (void)cc;
  return NULL;
}

/* ---- the server thread ---- */
static void respond(TRITONSERVER_InferenceRequest *r, const Tensor *src, uint32_t flags) {
  TRITONSERVER_InferenceResponse *resp = calloc(1, sizeof *resp);
  resp->allocator = r->allocator;
  Tensor *out = &resp->outputs[0];
  *out = *src;
  snprintf(out->name, sizeof out->name, "%s",
           strcmp(r->model, "repeat_int32") == 0 ? "OUT" : "OUTPUT0");
  void *buffer = NULL;
  int mem = 0;
  int64_t mem_id = 0;
  TRITONSERVER_Error *e = r->allocator->alloc(r->allocator, out->name, src->size, 0, 0,
                                              r->allocator_userp, &buffer, &out->buffer_userp,
                                              &mem, &mem_id);
  if (e != NULL) {
    resp->error = e;
  } else {
    if (src->size > 0) memcpy(buffer, src->data, src->size);
    out->data = buffer;
    resp->n_outputs = 1;
    __atomic_add_fetch(&responses_sent, 1, __ATOMIC_SEQ_CST);
  }
  if (flags & 1) leave_flight();
  r->response_fn(resp, flags, r->response_userp);
}

static void serve(TRITONSERVER_Server *s, TRITONSERVER_InferenceRequest *r) {
  uint64_t t0 = now_ns();
  if (strcmp(r->model, "repeat_int32") == 0) {
    int32_t n = 0;
    if (r->n_inputs > 0 && r->inputs[0].size >= 4) memcpy(&n, r->inputs[0].data, 4);
    for (int32_t i = 0; i < n; i++) {
      Tensor t = r->inputs[0];
      t.data = (char *)&i;
      t.size = 4;
      respond(r, &t, 0);
    }
    leave_flight();
    r->response_fn(NULL, 1, r->response_userp);
  } else {
    respond(r, &r->inputs[0], 1);
  }
  pthread_mutex_lock(&s->lock);
  s->success_count++;
  s->success_ns += now_ns() - t0;
  pthread_mutex_unlock(&s->lock);
  r->release_fn(r, 1, r->release_userp);
}

static void *server_main(void *arg) {
  TRITONSERVER_Server *s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->head == NULL && !s->stopping) pthread_cond_wait(&s->wake, &s->lock);
    if (s->head == NULL) break;
    TRITONSERVER_InferenceRequest *r = s->head;
    s->head = r->next;
    if (s->head == NULL) s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
#ifdef STUB_SERVE_DELAY_US
    struct timespec pause = {0, (long)STUB_SERVE_DELAY_US * 1000L};
    nanosleep(&pause, NULL);
#endif
    serve(s, r);
    pthread_mutex_lock(&s->lock);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

EXPORT TRITONSERVER_Error *TRITONSERVER_ServerNew(TRITONSERVER_Server **out,
                                                  TRITONSERVER_ServerOptions *o) {
  if (o->repo[0] == '\0') return err(3, "no model repository path set");
  TRITONSERVER_Server *s = calloc(1, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->wake, NULL);
  pthread_create(&s->thread, NULL, server_main, s);
  *out = s;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerDelete(TRITONSERVER_Server *s) {
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL);
  free(s);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerIsLive(TRITONSERVER_Server *s, bool *live) {
  (void)s;
  *live = true;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerIsReady(TRITONSERVER_Server *s, bool *ready) {
  (void)s;
  *ready = true;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerMetadata(TRITONSERVER_Server *s,
                                                       TRITONSERVER_Message **m) {
  (void)s;
  *m = message("{\"name\":\"triton\",\"version\":\"stub\",\"extensions\":[\"statistics\"]}");
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerModelMetadata(TRITONSERVER_Server *s, const char *name,
                                                            int64_t version, TRITONSERVER_Message **m) {
  (void)s, (void)version;
  if (strcmp(name, "identity_fp32") == 0) {
    *m = message("{\"name\":\"identity_fp32\",\"versions\":[\"1\"],\"platform\":\"stub\","
                 "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[16]}],"
                 "\"outputs\":[{\"name\":\"OUTPUT0\",\"datatype\":\"FP32\",\"shape\":[16]}]}");
  } else if (strcmp(name, "repeat_int32") == 0) {
    *m = message("{\"name\":\"repeat_int32\",\"versions\":[\"1\"],\"platform\":\"stub\","
                 "\"inputs\":[{\"name\":\"IN\",\"datatype\":\"INT32\",\"shape\":[1]}],"
                 "\"outputs\":[{\"name\":\"OUT\",\"datatype\":\"INT32\",\"shape\":[1]}]}");
  } else {
    return err(2, "Request for unknown model");
  }
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerModelConfig(TRITONSERVER_Server *s, const char *name,
                                                          int64_t version, uint32_t config_version,
                                                          TRITONSERVER_Message **m) {
  (void)s, (void)version, (void)config_version;
  if (strcmp(name, "identity_fp32") == 0) {
    *m = message("{\"name\":\"identity_fp32\",\"platform\":\"stub\",\"max_batch_size\":0,"
                 "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[16]}],"
                 "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[16]}]}");
  } else if (strcmp(name, "repeat_int32") == 0) {
    *m = message("{\"name\":\"repeat_int32\",\"platform\":\"stub\",\"max_batch_size\":0,"
                 "\"model_transaction_policy\":{\"decoupled\":true},"
                 "\"input\":[{\"name\":\"IN\",\"data_type\":\"TYPE_INT32\",\"dims\":[1]}],"
                 "\"output\":[{\"name\":\"OUT\",\"data_type\":\"TYPE_INT32\",\"dims\":[1]}]}");
  } else {
    return err(2, "Request for unknown model");
  }
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerModelStatistics(TRITONSERVER_Server *s, const char *name,
                                                              int64_t version,
                                                              TRITONSERVER_Message **m) {
  (void)version;
  if (name[0] != '\0' && !known_model(name)) return err(2, "Request for unknown model");
  const char *model = name[0] != '\0' ? name : "identity_fp32";
  pthread_mutex_lock(&s->lock);
  uint64_t n = s->success_count, ns = s->success_ns;
  pthread_mutex_unlock(&s->lock);
  char json[1024];
  snprintf(json, sizeof json,
           "{\"model_stats\":[{\"name\":\"%s\",\"version\":\"1\",\"inference_count\":%llu,"
           "\"execution_count\":%llu,\"inference_stats\":{\"success\":{\"count\":%llu,\"ns\":%llu},"
           "\"queue\":{\"count\":%llu,\"ns\":%llu},\"compute_infer\":{\"count\":%llu,\"ns\":%llu}}}]}",
           model, (unsigned long long)n, (unsigned long long)n, (unsigned long long)n,
           (unsigned long long)ns, (unsigned long long)n, 0ull, (unsigned long long)n,
           (unsigned long long)ns);
  *m = message(json);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerUnloadModel(TRITONSERVER_Server *s, const char *name) {
  (void)s, (void)name;
  __atomic_add_fetch(&unload_calls, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* ---- requests ---- */
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestNew(TRITONSERVER_InferenceRequest **r,
                                                            TRITONSERVER_Server *s, const char *model,
                                                            int64_t version) {
  (void)s, (void)version;
  if (!known_model(model)) return err(2, "Request for unknown model");
  *r = calloc(1, sizeof **r);
  snprintf((*r)->model, sizeof (*r)->model, "%s", model);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestDelete(TRITONSERVER_InferenceRequest *r) {
  for (int i = 0; i < r->n_inputs; i++) free(r->inputs[i].data);
  free(r);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetId(TRITONSERVER_InferenceRequest *r,
                                                              const char *id) {
  (void)r, (void)id;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetFlags(TRITONSERVER_InferenceRequest *r,
                                                                 uint32_t flags) {
  r->flags = flags;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetCorrelationId(TRITONSERVER_InferenceRequest *r,
                                                                         uint64_t id) {
  r->correlation_id = id;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetCorrelationIdString(
    TRITONSERVER_InferenceRequest *r, const char *id) {
  (void)r, (void)id;
  return NULL;
}
#ifndef STUB_OMIT_PRIORITY
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetPriorityUInt64(
    TRITONSERVER_InferenceRequest *r, uint64_t p) {
  (void)r, (void)p;
  return NULL;
}
#endif
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
    TRITONSERVER_InferenceRequest *r, uint64_t us) {
  (void)r, (void)us;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestAddInput(TRITONSERVER_InferenceRequest *r,
                                                                 const char *name, int datatype,
                                                                 const int64_t *shape, uint64_t dims) {
  if (r->n_inputs == MAX_TENSORS || dims > MAX_DIMS) return err(3, "too many inputs or dims");
  Tensor *t = &r->inputs[r->n_inputs++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->datatype = datatype;
  t->dims = dims;
  memcpy(t->shape, shape, dims * sizeof *shape);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestAppendInputData(
    TRITONSERVER_InferenceRequest *r, const char *name, const void *base, size_t size, int mem,
    int64_t mem_id) {
  (void)mem, (void)mem_id;
  for (int i = 0; i < r->n_inputs; i++) {
    Tensor *t = &r->inputs[i];
    if (strcmp(t->name, name) != 0) continue;
    t->data = realloc(t->data, t->size + size);
    memcpy(t->data + t->size, base, size);
    t->size += size;
    return NULL;
  }
  return err(3, "AppendInputData: no such input");
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestAddRequestedOutput(
    TRITONSERVER_InferenceRequest *r, const char *name) {
  (void)name;
  r->n_outputs++;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetReleaseCallback(
    TRITONSERVER_InferenceRequest *r, request_release_fn_t fn, void *userp) {
  r->release_fn = fn;
  r->release_userp = userp;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetResponseCallback(
    TRITONSERVER_InferenceRequest *r, TRITONSERVER_ResponseAllocator *a, void *a_userp,
    response_fn_t fn, void *userp) {
  r->allocator = a;
  r->allocator_userp = a_userp;
  r->response_fn = fn;
  r->response_userp = userp;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_ServerInferAsync(TRITONSERVER_Server *s,
                                                         TRITONSERVER_InferenceRequest *r,
                                                         TRITONSERVER_InferenceTrace *trace) {
  (void)trace;
  uint64_t call = __atomic_fetch_add(&infer_calls, 1, __ATOMIC_SEQ_CST);
#ifdef STUB_FAIL_INFER_AFTER
  if (call >= STUB_FAIL_INFER_AFTER) return err(4, "stub: injected InferAsync failure");
#else
  (void)call;
#endif
  if (r->release_fn == NULL || r->response_fn == NULL) return err(3, "callbacks not set");
  __atomic_add_fetch(&infer_accepted, 1, __ATOMIC_SEQ_CST);
  enter_flight();
  pthread_mutex_lock(&s->lock);
  r->next = NULL;
  if (s->tail) s->tail->next = r; else s->head = r;
  s->tail = r;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ---- responses ---- */
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceResponseDelete(TRITONSERVER_InferenceResponse *r) {
  for (int i = 0; i < r->n_outputs; i++) {
    Tensor *t = &r->outputs[i];
    r->allocator->release(r->allocator, t->data, t->buffer_userp, t->size, 0, 0);
  }
  TRITONSERVER_ErrorDelete(r->error);
  free(r);
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceResponseError(TRITONSERVER_InferenceResponse *r) {
  return r->error;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceResponseOutputCount(TRITONSERVER_InferenceResponse *r,
                                                                     uint32_t *count) {
  *count = (uint32_t)r->n_outputs;
  return NULL;
}
EXPORT TRITONSERVER_Error *TRITONSERVER_InferenceResponseOutput(
    TRITONSERVER_InferenceResponse *r, uint32_t index, const char **name, int *datatype,
    const int64_t **shape, uint64_t *dims, const void **base, size_t *size, int *mem,
    int64_t *mem_id, void **userp) {
  if (index >= (uint32_t)r->n_outputs) return err(3, "output index out of range");
  Tensor *t = &r->outputs[index];
  *name = t->name;
  *datatype = t->datatype;
  *shape = t->shape;
  *dims = t->dims;
  *base = t->data;
  *size = t->size;
  *mem = 0;
  *mem_id = 0;
  *userp = t->buffer_userp;
  return NULL;
}
