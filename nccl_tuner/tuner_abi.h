/* NCCL's tuner plugin interface, declared here from its published description
 * (NVIDIA/nccl src/include/plugin/tuner/tuner_v2.h … tuner_v6.h, src/include/nccl_common.h,
 * src/include/plugin/nccl_tuner.h). NCCL dlopens the plugin and looks these symbols up by name
 * (src/plugin/tuner.cc): NCCL 2.28 tries ncclTunerPlugin_v5, then _v4, _v3, _v2; later releases
 * try ncclTunerPlugin_v6 first. CUDA's include folder ships no tuner header, so the layouts are
 * stated here; only the field order and types matter for the ABI, the names are artune's.
 *
 * C-compatible: the plugin (C++) and its tests include it. */
#ifndef ARTUNE_NCCL_TUNER_ABI_H_
#define ARTUNE_NCCL_TUNER_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ncclResult_t: an int-sized enum; the plugin only ever returns success. */
typedef enum { artuneNcclSuccess = 0, artuneNcclInternalError = 3 } artuneNcclResult;

/** ncclDebugLogLevel (nccl_common.h). */
typedef enum {
  artuneNcclLogNone = 0,
  artuneNcclLogVersion = 1,
  artuneNcclLogWarn = 2,
  artuneNcclLogInfo = 3,
  artuneNcclLogAbort = 4,
  artuneNcclLogTrace = 5
} artuneNcclLogLevel;

/** NCCL_TUNING, the debug subsystem flag of tuner messages (NCCL_DEBUG_SUBSYS=TUNING). */
#define ARTUNE_NCCL_LOG_TUNING 0x40UL

/** ncclDebugLogger_t: printf-style logger NCCL hands to init. */
typedef void (*artuneNcclLogger)(artuneNcclLogLevel level, unsigned long flags, const char* file, int line,
                                 const char* fmt, ...);

/** ncclFunc_t values (nccl_common.h); all-reduce, all-gather and reduce-scatter are steered. */
typedef enum {
  artuneNcclFuncBroadcast = 0,
  artuneNcclFuncReduce = 1,
  artuneNcclFuncAllGather = 2,
  artuneNcclFuncReduceScatter = 3,
  artuneNcclFuncAllReduce = 4
} artuneNcclFunc;

/** Algorithm rows of the cost table (nccl_tuner.h NCCL_ALGO_*). */
enum {
  ARTUNE_NCCL_ALGO_TREE = 0,
  ARTUNE_NCCL_ALGO_RING = 1,
  ARTUNE_NCCL_ALGO_COLLNET_DIRECT = 2,
  ARTUNE_NCCL_ALGO_COLLNET_CHAIN = 3,
  ARTUNE_NCCL_ALGO_NVLS = 4,
  ARTUNE_NCCL_ALGO_NVLS_TREE = 5,
  ARTUNE_NCCL_ALGO_PAT = 6,
  ARTUNE_NCCL_NUM_ALGORITHMS = 7
};
/** Protocol columns of the cost table (NCCL_PROTO_*). */
enum {
  ARTUNE_NCCL_PROTO_LL = 0,
  ARTUNE_NCCL_PROTO_LL128 = 1,
  ARTUNE_NCCL_PROTO_SIMPLE = 2,
  ARTUNE_NCCL_NUM_PROTOCOLS = 3
};
/** Cost of an entry NCCL does not support here (NCCL_ALGO_PROTO_IGNORE). */
#define ARTUNE_NCCL_ALGO_PROTO_IGNORE (-1.0f)

/** ncclNvlDomainInfo_v5_t (v6 uses the same). */
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} artuneNcclNvlDomainInfo;

/** ncclTunerConstants_v5_t (v6 uses the same): NCCL's latency/bandwidth tables, in/out at init. */
typedef struct {
  double baseLatencies[7][3];
  double hwLatencies[3][7][3];
  double llMaxBws[4][3];
  double perChMaxRingLL128Bws[4][3];
  double perChMaxTreeLL128Bws[4][3];
  double perChMaxTreeBws[4][3];
  double perChMaxNVLSTreeBws[4][3];
} artuneNcclTunerConstants;

/** ncclTuner_v6_t: v5 plus an optional chunk-size hook. */
typedef struct {
  const char* name;
  artuneNcclResult (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, artuneNcclLogger logFunction,
                           artuneNcclNvlDomainInfo* nvlDomainInfo, artuneNcclTunerConstants* constants);
  artuneNcclResult (*getCollInfo)(void* ctx, artuneNcclFunc collType, size_t nBytes, int numPipeOps,
                                  float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels);
  artuneNcclResult (*finalize)(void* ctx);
  artuneNcclResult (*getChunkSize)(void* ctx, artuneNcclFunc collType, size_t nBytes, int algo, int proto,
                                   int nChannels, size_t* chunkSize);
} artuneNcclTunerV6;

/** ncclTuner_v5_t. */
typedef struct {
  const char* name;
  artuneNcclResult (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, artuneNcclLogger logFunction,
                           artuneNcclNvlDomainInfo* nvlDomainInfo, artuneNcclTunerConstants* constants);
  artuneNcclResult (*getCollInfo)(void* ctx, artuneNcclFunc collType, size_t nBytes, int numPipeOps,
                                  float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels);
  artuneNcclResult (*finalize)(void* ctx);
} artuneNcclTunerV5;

/** ncclTuner_v4_t. */
typedef struct {
  const char* name;
  artuneNcclResult (*init)(size_t nRanks, size_t nNodes, artuneNcclLogger logFunction, void** ctx);
  artuneNcclResult (*getCollInfo)(void* ctx, artuneNcclFunc collType, size_t nBytes, int numPipeOps,
                                  float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels);
  artuneNcclResult (*destroy)(void* ctx);
} artuneNcclTunerV4;

/** ncclTuner_v3_t: v4 without regBuff. */
typedef struct {
  const char* name;
  artuneNcclResult (*init)(size_t nRanks, size_t nNodes, artuneNcclLogger logFunction, void** ctx);
  artuneNcclResult (*getCollInfo)(void* ctx, artuneNcclFunc collType, size_t nBytes, int numPipeOps,
                                  float** collCostTable, int numAlgo, int numProto, int* nChannels);
  artuneNcclResult (*destroy)(void* ctx);
} artuneNcclTunerV3;

/** ncclTuner_v2_t: answers an algorithm and a protocol instead of editing a cost table. */
typedef struct {
  const char* name;
  artuneNcclResult (*init)(size_t nRanks, size_t nNodes, artuneNcclLogger logFunction, void** ctx);
  artuneNcclResult (*getCollInfo)(void* ctx, artuneNcclFunc collType, size_t nBytes, int collNetSupport,
                                  int nvlsSupport, int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  artuneNcclResult (*destroy)(void* ctx);
} artuneNcclTunerV2;

#ifdef __cplusplus
}
#endif

#endif /* ARTUNE_NCCL_TUNER_ABI_H_ */
