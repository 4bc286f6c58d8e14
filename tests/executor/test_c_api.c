/* The C API from C: four cpu ranks on pthreads, in and out of place, every op on int32, all-gather and
 * reduce-scatter of odd blocks, asynchronous calls and requests, the tuning options (profile, tune_sizes), error
 * codes and messages, the plan label and the cache dump, options of an earlier header. Exits 0 when every check
 * holds; prints each failure. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "artune/artune.h"

#define RANKS 4
#define COUNT 1001

static artune_comm_t comms[RANKS];
static int failures = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void check(int ok, const char* what) {
  if (!ok) {
    pthread_mutex_lock(&lock);
    ++failures;
    fprintf(stderr, "FAILED: %s\n", what);
    pthread_mutex_unlock(&lock);
  }
}

struct job {
  int rank;
  artune_op_t op;
  int in_place;
};

static void* rank_main(void* arg) {
  const struct job* j = (const struct job*)arg;
  int32_t send[COUNT], recv[COUNT];
  for (int i = 0; i < COUNT; ++i) send[i] = (j->rank + 1) * (i % 5 + 1);
  int32_t* out = j->in_place ? send : recv;
  artune_result_t rc = artune_allreduce(comms[j->rank], send, out, COUNT, ARTUNE_INT32, j->op, NULL);
  check(rc == ARTUNE_SUCCESS, artune_last_error());
  for (int i = 0; i < COUNT; ++i) {
    const int32_t v = i % 5 + 1;
    int32_t want = 0;
    switch (j->op) {
      case ARTUNE_SUM: want = v * (1 + 2 + 3 + 4); break;
      case ARTUNE_PROD: want = v * v * v * v * 24; break;
      case ARTUNE_MIN: want = v; break;
      case ARTUNE_MAX: want = 4 * v; break;
      case ARTUNE_AVG: want = v * 10 / 4; break;
      case ARTUNE_OP_MAX_ENUM: break;
    }
    if (out[i] != want) {
      check(0, "wrong element");
      break;
    }
  }
  return NULL;
}

#define BLOCK 7

/* All-gather (out of place) then reduce-scatter (in place, max) of BLOCK int32 per rank. */
static void* collective_main(void* arg) {
  const struct job* j = (const struct job*)arg;
  int32_t mine[BLOCK], all[BLOCK * RANKS];
  for (int i = 0; i < BLOCK; ++i) mine[i] = 100 * (j->rank + 1) + i;
  check(artune_allgather(comms[j->rank], mine, all, BLOCK, ARTUNE_INT32, NULL) == ARTUNE_SUCCESS, artune_last_error());
  for (int k = 0; k < RANKS; ++k) {
    for (int i = 0; i < BLOCK; ++i) {
      if (all[k * BLOCK + i] != 100 * (k + 1) + i) check(0, "allgather: wrong element");
    }
  }
  /* Rank r contributes (r + 1) * (index + 1); the max of block r is 4 * (index + 1). */
  for (int i = 0; i < BLOCK * RANKS; ++i) all[i] = (j->rank + 1) * (i + 1);
  int32_t* own = all + j->rank * BLOCK;
  check(artune_reducescatter(comms[j->rank], all, own, BLOCK, ARTUNE_INT32, ARTUNE_MAX, NULL) == ARTUNE_SUCCESS,
        artune_last_error());
  for (int i = 0; i < BLOCK; ++i) {
    if (own[i] != RANKS * (j->rank * BLOCK + i + 1)) check(0, "reducescatter: wrong element");
  }
  return NULL;
}

/* Two asynchronous all-reduces in flight, then an all-gather; waited in order. */
static void* async_main(void* arg) {
  const struct job* j = (const struct job*)arg;
  int64_t a[COUNT], b[COUNT], block[3], all[3 * RANKS];
  for (int i = 0; i < COUNT; ++i) {
    a[i] = j->rank + i;
    b[i] = 10 * (j->rank + 1);
  }
  for (int i = 0; i < 3; ++i) block[i] = j->rank * 3 + i;
  artune_request_t ra = NULL, rb = NULL, rc = NULL;
  check(artune_allreduce_async(comms[j->rank], a, a, COUNT, ARTUNE_INT64, ARTUNE_SUM, NULL, &ra) == ARTUNE_SUCCESS,
        artune_last_error());
  check(artune_allreduce_async(comms[j->rank], b, b, COUNT, ARTUNE_INT64, ARTUNE_MAX, NULL, &rb) == ARTUNE_SUCCESS,
        artune_last_error());
  check(artune_allgather_async(comms[j->rank], block, all, 3, ARTUNE_INT64, NULL, &rc) == ARTUNE_SUCCESS,
        artune_last_error());
  check(artune_request_wait(ra) == ARTUNE_SUCCESS && artune_request_wait(rb) == ARTUNE_SUCCESS &&
            artune_request_wait(rc) == ARTUNE_SUCCESS,
        artune_last_error());
  int done = 0;
  check(artune_request_test(rc, &done) == ARTUNE_SUCCESS && done == 1, "request_test after wait");
  for (int i = 0; i < COUNT; ++i) {
    if (a[i] != 4 * i + 6 || b[i] != 40) {
      check(0, "async: wrong element");
      break;
    }
  }
  for (int i = 0; i < 3 * RANKS; ++i) {
    if (all[i] != i) check(0, "async allgather: wrong element");
  }
  artune_request_free(ra);
  artune_request_free(rb);
  artune_request_free(rc);
  return NULL;
}

int main(void) {
  artune_options_t options;
  artune_options_init(&options);
  check(options.pad_limit == 262144 && options.cache_capacity == 64 && options.timeout_s == 60, "defaults");
  options.topology = "uniform:4";
  options.spec = "rechd";
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &options, RANKS, comms) == ARTUNE_SUCCESS, artune_last_error());
  int rank = -1, size = -1;
  check(artune_comm_rank(comms[3], &rank) == ARTUNE_SUCCESS && rank == 3, "rank");
  check(artune_comm_size(comms[3], &size) == ARTUNE_SUCCESS && size == 4, "size");
  const artune_op_t ops[] = {ARTUNE_SUM, ARTUNE_PROD, ARTUNE_MIN, ARTUNE_MAX};
  for (int o = 0; o < 4; ++o) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      pthread_t threads[RANKS];
      struct job jobs[RANKS];
      for (int r = 0; r < RANKS; ++r) {
        jobs[r].rank = r;
        jobs[r].op = ops[o];
        jobs[r].in_place = in_place;
        pthread_create(&threads[r], NULL, rank_main, &jobs[r]);
      }
      for (int r = 0; r < RANKS; ++r) pthread_join(threads[r], NULL);
    }
  }
  char text[256];
  check(artune_comm_last_plan(comms[0], text, sizeof text) == ARTUNE_SUCCESS && strcmp(text, "rechd") == 0,
        "last plan");
  check(
      artune_comm_dump_cache(comms[0], text, sizeof text) == ARTUNE_SUCCESS &&
          strstr(text, "allreduce rechd  spec  bucket 10 (4096 B)  count 1001 int32 max  devices 4  calls 2\n") == text,
      "dump cache");
  /* Truncation keeps the terminating NUL. */
  check(artune_comm_last_plan(comms[0], text, 3) == ARTUNE_SUCCESS && strcmp(text, "re") == 0, "truncated label");

  {
    pthread_t threads[RANKS];
    struct job jobs[RANKS];
    for (int r = 0; r < RANKS; ++r) {
      jobs[r].rank = r;
      pthread_create(&threads[r], NULL, collective_main, &jobs[r]);
    }
    for (int r = 0; r < RANKS; ++r) pthread_join(threads[r], NULL);
  }
  check(artune_comm_dump_cache(comms[0], text, sizeof text) == ARTUNE_SUCCESS && strstr(text, "reducescatter ") == text,
        "dump cache after reducescatter");

  {
    pthread_t threads[RANKS];
    struct job jobs[RANKS];
    for (int r = 0; r < RANKS; ++r) {
      jobs[r].rank = r;
      pthread_create(&threads[r], NULL, async_main, &jobs[r]);
    }
    for (int r = 0; r < RANKS; ++r) pthread_join(threads[r], NULL);
  }
  artune_request_free(NULL);

  /* Errors: codes, static strings, per-thread messages. */
  int32_t x[4] = {1, 2, 3, 4};
  check(artune_allreduce(NULL, x, x, 4, ARTUNE_INT32, ARTUNE_SUM, NULL) == ARTUNE_ERR_INVALID_USAGE, "null comm");
  check(strcmp(artune_last_error(), "artune_allreduce: comm is NULL") == 0, artune_last_error());
  check(artune_allreduce(comms[0], x, x, -4, ARTUNE_INT32, ARTUNE_SUM, NULL) == ARTUNE_ERR_INVALID_USAGE, "count");
  check(artune_allreduce(comms[0], x, x, 4, (artune_dtype_t)42, ARTUNE_SUM, NULL) == ARTUNE_ERR_INVALID_USAGE, "dtype");
  check(strcmp(artune_last_error(), "artune_allreduce: unknown dtype") == 0, artune_last_error());
  check(artune_reducescatter(comms[0], x, x, 1, ARTUNE_INT32, (artune_op_t)9, NULL) == ARTUNE_ERR_INVALID_USAGE, "op");
  check(strcmp(artune_last_error(), "artune_reducescatter: unknown op") == 0, artune_last_error());
  check(artune_allgather(comms[0], x + 1, x, 1, ARTUNE_INT32, NULL) == ARTUNE_ERR_INVALID_USAGE, "overlap");
  check(strcmp(artune_last_error(), "allgather: send overlaps recv without being this rank's block of it") == 0,
        artune_last_error());
  check(strcmp(artune_error_string(ARTUNE_ERR_TIMEOUT), "timeout") == 0, "error string");
  check(strcmp(artune_error_string(ARTUNE_ERR_REMOTE), "remote or library failure") == 0, "error string");
  artune_comm_t one;
  artune_comm_t pair_probe[2];
  options.topology = "uniform:2";
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &options, 3, &one) == ARTUNE_ERR_INVALID_USAGE, "rank mismatch");
  options.topology = "no-such-topology.json";
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &options, 2, &one) == ARTUNE_ERR_INVALID_USAGE, "bad topology");
  /* ABI growth: options carry their size; one never initialised is refused, a later header's larger one taken. */
  check(options.struct_size == sizeof(artune_options_t), "struct_size set by artune_options_init");
  artune_options_t raw;
  memset(&raw, 0, sizeof raw);
  raw.topology = "uniform:2";
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &raw, 2, pair_probe) == ARTUNE_ERR_INVALID_USAGE, "size 0");
  check(strstr(artune_last_error(), "initialise the options with artune_options_init") != NULL, artune_last_error());
  artune_options_init(&raw);
  raw.topology = "uniform:2";
  raw.struct_size = sizeof(artune_options_t) + 64;
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &raw, 2, pair_probe) == ARTUNE_SUCCESS, artune_last_error());
  artune_comm_destroy(pair_probe[0]);
  artune_comm_destroy(pair_probe[1]);
  /* An earlier header's options (ending at reducescatter_table) are taken, the later fields defaulted; smaller are
     refused. */
  artune_options_init(&raw);
  raw.topology = "uniform:2";
  raw.spec = "xring";
  raw.struct_size = offsetof(artune_options_t, profile);
  raw.profile = "no-such-profile"; /* beyond the caller's size: not read */
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &raw, 2, pair_probe) == ARTUNE_SUCCESS, artune_last_error());
  artune_comm_destroy(pair_probe[0]);
  artune_comm_destroy(pair_probe[1]);
  raw.struct_size = offsetof(artune_options_t, profile) - 1;
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &raw, 2, pair_probe) == ARTUNE_ERR_INVALID_USAGE, "short size");

  /* Tuning options: tune_sizes (in-memory tuning at those sizes), profile; bad ones named. */
  const uint64_t sizes[] = {64, 4096};
  artune_options_init(&raw);
  raw.topology = "uniform:2";
  raw.tune_sizes = sizes;
  raw.tune_sizes_count = 2;
  raw.profile = "cpu";
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &raw, 2, pair_probe) == ARTUNE_SUCCESS, artune_last_error());
  artune_comm_destroy(pair_probe[0]);
  artune_comm_destroy(pair_probe[1]);
  raw.profile = "gpu";
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &raw, 2, pair_probe) == ARTUNE_ERR_INVALID_USAGE, "bad profile");
  check(strstr(artune_last_error(), "parameter profile") != NULL, artune_last_error());
  raw.profile = NULL;
  raw.tune_sizes = NULL;
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &raw, 2, pair_probe) == ARTUNE_ERR_INVALID_USAGE, "NULL sizes");
  check(strcmp(artune_last_error(), "options->tune_sizes is NULL but tune_sizes_count > 0") == 0, artune_last_error());
  artune_request_t req = NULL;
  check(artune_allreduce_async(comms[0], x, x, 4, ARTUNE_INT32, ARTUNE_SUM, NULL, NULL) == ARTUNE_ERR_INVALID_USAGE,
        "NULL request");
  check(artune_allreduce_async(comms[0], x, x, -1, ARTUNE_INT32, ARTUNE_SUM, NULL, &req) == ARTUNE_ERR_INVALID_USAGE &&
            req == NULL,
        "bad input fails at submission, no request made");

  /* A rank that never calls: the others end with a timeout. */
  options.topology = "uniform:2";
  options.timeout_s = 0.3;
  artune_comm_t pair[2];
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &options, 2, pair) == ARTUNE_SUCCESS, artune_last_error());
  check(artune_allreduce(pair[0], x, x, 4, ARTUNE_INT32, ARTUNE_SUM, NULL) == ARTUNE_ERR_TIMEOUT, "timeout");
  check(strstr(artune_last_error(), "1 of 2 ranks did not call allreduce within 0.3 s") != NULL, artune_last_error());
  artune_comm_destroy(pair[0]);
  artune_comm_destroy(pair[1]);
  /* The same, asynchronous: the request ends with the timeout. */
  check(artune_comm_init_local(ARTUNE_BACKEND_CPU, &options, 2, pair) == ARTUNE_SUCCESS, artune_last_error());
  check(artune_allreduce_async(pair[0], x, x, 4, ARTUNE_INT32, ARTUNE_SUM, NULL, &req) == ARTUNE_SUCCESS,
        artune_last_error());
  check(artune_request_wait(req) == ARTUNE_ERR_TIMEOUT, "async timeout");
  check(strstr(artune_last_error(), "1 of 2 ranks did not call allreduce within 0.3 s") != NULL, artune_last_error());
  artune_request_free(req);
  artune_comm_destroy(pair[0]);
  artune_comm_destroy(pair[1]);

  for (int r = 0; r < RANKS; ++r) artune_comm_destroy(comms[r]);
  artune_comm_destroy(NULL);
  if (failures == 0) printf("c_api: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
