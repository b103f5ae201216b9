// learnopt's fused per-element MLP for XLA:CPU, as an XLA FFI custom call.
//
// out[k, i] = (relu(relu(x[i, :] @ w0 + b0) @ w1 + b1) @ w2 + b2)[k] for every row i of
// x = concat(groups, axis=1), the groups [N, F_g] given separately (never concatenated in
// memory): two hidden layers of 32 units, 1 to 4 outputs, float32. With norm_eps >= 0,
// each column of x is first divided by sqrt(norm_eps + mean(column^2)) (a pass of sums of
// squares, folded into w0). A second result holds the second hidden layer summed over
// rows, per chunk of kChunk * kTile rows ([C, 32]: the caller sums the C rows), for the
// outputs that are only needed as element means (RNNMLPLOpt's); given [0, 32], the sums
// are not computed. Each tile of 64 rows computes its layers 4 units at a time in
// registers, the hidden layers kept in L1 instead of written out, which XLA:CPU's GEMM
// kernels do for [N, 32] @ [32, 32] products (and run at about a third of their
// large-matmul rate). Compiled on the user's machine by
// learnopt/learned_optimizers/fused_kernel.py (-O3 -march=native); the same function as
// per_element's other forms (tests/test_fused_kernel.py), forward only: derivatives are
// taken through the blocked matrix-product form.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kHidden = 32;  // both hidden layers
constexpr int64_t kMaxOut = 4;   // outputs
constexpr int64_t kTile = 64;    // rows per tile: 4 AVX-512 vectors
constexpr int64_t kUnits = 4;    // second-layer units accumulated together
constexpr int64_t kLanes = 16;   // running hidden sums per unit: one AVX-512 vector

constexpr int64_t kMaxGroups = 64;
constexpr int64_t kMaxFeatures = 64;  // feature columns, all groups

struct Weights {
  const float *w0, *b0, *w1, *b1, *w2, *b2;
  int64_t nout;
  int64_t ngroups;
  const float* group[kMaxGroups];  // [N, width[g]] row-major
  int64_t width[kMaxGroups];
};

// 16 floats: one AVX-512 register (two AVX2 ones, four SSE ones where that is what the
// compiler targets). GCC and Clang vector extensions: lane-wise arithmetic, a scalar
// operand broadcast.
typedef float V __attribute__((vector_size(64)));
constexpr int64_t kVec = kTile / kLanes;  // vectors per column of a tile

inline V Load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

// An empty asm that takes v in a vector register: GCC cannot then fold the load that
// made v into each multiply-add using it (it does, and re-reads memory once per use).
inline void KeepInRegister(V& v) {
#if defined(__x86_64__) && defined(__AVX512F__)
  asm("" : "+v"(v));
#endif
}

inline V Relu(V v) { return v > 0.0f ? v : V{}; }

// acc[u] = b[u] + sum_i in[i] * w[i * stride + u] for kU units, each kVec vectors (a
// register block: kU * kVec accumulators, each input vector loaded once per block).
template <int64_t kU>
inline void Units(const V (*in)[kVec], int64_t nin, const float* w, int64_t stride,
                  const float* b, V (*acc)[kVec]) {
  for (int64_t u = 0; u < kU; ++u) {
    for (int64_t v = 0; v < kVec; ++v) acc[u][v] = V{} + b[u];
  }
  for (int64_t i = 0; i < nin; ++i) {
    // Each input vector loaded once and used by the kU units (GCC otherwise re-reads it
    // from memory in every multiply-add: load-bound).
    float c[kU];
    for (int64_t u = 0; u < kU; ++u) c[u] = w[i * stride + u];
    for (int64_t v = 0; v < kVec; ++v) {
      V xv = in[i][v];
      KeepInRegister(xv);
      for (int64_t u = 0; u < kU; ++u) acc[u][v] += c[u] * xv;
    }
  }
}

// One tile of kTile rows. Every layer is computed kUnits units at a time in registers;
// the tile's inputs (transposed to one column of kTile values per feature), first and
// second hidden layers stay in L1. kSum: also add the second hidden layer into hsum,
// per-lane running sums [kHidden][kLanes]. Not inlined: inlined into its callers (eight
// instantiations), GCC 12 compiled an earlier version to 1.6x slower code.
template <int64_t kOut, bool kSum>
[[gnu::noinline]] void Tile(int64_t i0, int64_t len, const Weights& w, float* out, int64_t n,
                            float (*__restrict hsum)[kLanes]) {
  alignas(64) V x[kMaxFeatures][kVec];
  alignas(64) V h1[kHidden][kVec];
  alignas(64) V h2[kHidden][kVec];
  int64_t f = 0;  // the feature's row of w0
  for (int64_t g = 0; g < w.ngroups; ++g) {
    const int64_t width = w.width[g];
    const float* rows = w.group[g] + i0 * width;
    if (width == 1 && len == kTile) {
      for (int64_t v = 0; v < kVec; ++v) x[f][v] = Load(rows + v * kLanes);
    } else {
      float(*cols)[kTile] = reinterpret_cast<float(*)[kTile]>(&x[f][0]);
      for (int64_t t = 0; t < len; ++t) {
        for (int64_t c = 0; c < width; ++c) cols[c][t] = rows[t * width + c];
      }
      for (int64_t c = 0; c < width; ++c) {
        for (int64_t t = len; t < kTile; ++t) cols[c][t] = 0.0f;
      }
    }
    f += width;
  }
  for (int64_t j0 = 0; j0 < kHidden; j0 += kUnits) {
    V acc[kUnits][kVec];
    Units<kUnits>(x, f, w.w0 + j0, kHidden, w.b0 + j0, acc);
    for (int64_t u = 0; u < kUnits; ++u) {
      for (int64_t v = 0; v < kVec; ++v) h1[j0 + u][v] = Relu(acc[u][v]);
    }
  }
  for (int64_t j0 = 0; j0 < kHidden; j0 += kUnits) {
    V acc[kUnits][kVec];
    Units<kUnits>(h1, kHidden, w.w1 + j0, kHidden, w.b1 + j0, acc);
    for (int64_t u = 0; u < kUnits; ++u) {
      for (int64_t v = 0; v < kVec; ++v) h2[j0 + u][v] = Relu(acc[u][v]);
    }
  }
  if constexpr (kSum) {
    if (len < kTile) {  // rows past len (padding, never written out) left out of the sum
      for (int64_t j = 0; j < kHidden; ++j) {
        float* row = reinterpret_cast<float*>(&h2[j][0]);
        for (int64_t t = len; t < kTile; ++t) row[t] = 0.0f;
      }
    }
    for (int64_t j = 0; j < kHidden; ++j) {
      V s = Load(hsum[j]) + ((h2[j][0] + h2[j][1]) + (h2[j][2] + h2[j][3]));
      std::memcpy(hsum[j], &s, sizeof(V));
    }
  }
  V o[kOut][kVec];
  Units<kOut>(h2, kHidden, w.w2, kOut, w.b2, o);
  for (int64_t k = 0; k < kOut; ++k) {
    float* dst = out + k * n + i0;
    if (len == kTile) {
      std::memcpy(dst, &o[k][0], sizeof(o[k]));
    } else {
      std::memcpy(dst, &o[k][0], len * sizeof(float));
    }
  }
}

template <int64_t kOut, bool kSum>
void Tiles(int64_t lo, int64_t hi, int64_t n, const Weights& w, float* out,
           float (*lanes)[kLanes]) {
  for (int64_t tile = lo; tile < hi; ++tile) {
    const int64_t i0 = tile * kTile;
    Tile<kOut, kSum>(i0, std::min(kTile, n - i0), w, out, n, lanes);
  }
}

constexpr int64_t kChunk = 16;  // tiles per claim
constexpr int64_t kChunkRows = kChunk * kTile;

// Calls fn(0), ..., fn(count - 1), each index claimed from a shared counter by this
// thread and by helpers on XLA's intra-op thread pool (so the kernel shares the cores
// with the XLA work running beside it instead of oversubscribing them). Returns when all
// have run; a helper that starts late finds no index left and returns without calling fn.
struct Claims {
  std::function<void(int64_t)> fn;
  int64_t count = 0;
  std::atomic<int64_t> next{0}, finished{0};

  void Run() {
    for (int64_t c = next.fetch_add(1); c < count; c = next.fetch_add(1)) {
      fn(c);
      finished.fetch_add(1, std::memory_order_release);
    }
  }
};

void ParallelFor(ffi::ThreadPool& pool, int64_t count, std::function<void(int64_t)> fn) {
  auto claims = std::make_shared<Claims>();
  claims->fn = std::move(fn);
  claims->count = count;
  const int64_t helpers = std::min<int64_t>(pool.num_threads(), count - 1);
  for (int64_t h = 0; h < helpers; ++h) pool.Schedule([claims] { claims->Run(); });
  claims->Run();
  while (claims->finished.load(std::memory_order_acquire) < count) std::this_thread::yield();
}

// Sums of squares of every feature column over rows [r0, r0 + rows), into sq[F]. Each
// group's rows are read as one contiguous run, 16 rows (16 * width floats) at a time into
// running sums that vectorize; column c's sum is that of the entries at c, c + width, ...
void ChunkSquares(const Weights& w, int64_t r0, int64_t rows, float* sq) {
  constexpr int64_t kRowsPerStep = 16;
  int64_t f = 0;
  for (int64_t g = 0; g < w.ngroups; ++g) {
    const int64_t width = w.width[g];
    const float* x = w.group[g] + r0 * width;
    for (int64_t c = 0; c < width; ++c) sq[f + c] = 0.0f;
    if (width * kRowsPerStep <= 1024) {
      const int64_t span = width * kRowsPerStep, steps = rows / kRowsPerStep;
      alignas(64) float acc[1024];
      for (int64_t j = 0; j < span; ++j) acc[j] = 0.0f;
      for (int64_t s = 0; s < steps; ++s) {
        const float* xs = x + s * span;
        for (int64_t j = 0; j < span; ++j) acc[j] += xs[j] * xs[j];
      }
      for (int64_t j = 0; j < span; ++j) sq[f + j % width] += acc[j];
      for (int64_t r = steps * kRowsPerStep; r < rows; ++r) {
        for (int64_t c = 0; c < width; ++c) sq[f + c] += x[r * width + c] * x[r * width + c];
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < width; ++c) sq[f + c] += x[r * width + c] * x[r * width + c];
      }
    }
    f += width;
  }
}

template <bool kSum>
void Dispatch(const Weights& w, int64_t lo, int64_t hi, int64_t n, float* out,
              float (*lanes)[kLanes]) {
  switch (w.nout) {
    case 1: Tiles<1, kSum>(lo, hi, n, w, out, lanes); break;
    case 2: Tiles<2, kSum>(lo, hi, n, w, out, lanes); break;
    case 3: Tiles<3, kSum>(lo, hi, n, w, out, lanes); break;
    default: Tiles<4, kSum>(lo, hi, n, w, out, lanes); break;
  }
}

ffi::Error FusedMlpImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> w0, ffi::Buffer<ffi::F32> b0,
                        ffi::Buffer<ffi::F32> w1, ffi::Buffer<ffi::F32> b1,
                        ffi::Buffer<ffi::F32> w2, ffi::Buffer<ffi::F32> b2,
                        ffi::RemainingArgs groups, ffi::ResultBuffer<ffi::F32> out,
                        ffi::ResultBuffer<ffi::F32> hsum, float norm_eps) {
  const auto w2d = w2.dimensions();
  const auto od = out->dimensions();
  const auto hd = hsum->dimensions();
  if (w2d.size() != 2 || od.size() != 2 || groups.size() < 1 ||
      static_cast<int64_t>(groups.size()) > kMaxGroups) {
    return ffi::Error::InvalidArgument(
        "learnopt fused_mlp: w2 [32, K], out [K, N] and 1-64 feature groups expected");
  }
  const int64_t nout = w2d[1], n = od[1];
  Weights w{w0.typed_data(), b0.typed_data(), w1.typed_data(), b1.typed_data(),
            w2.typed_data(), b2.typed_data(), nout, static_cast<int64_t>(groups.size()),
            {}, {}};
  int64_t nf = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto buf = groups.get<ffi::Buffer<ffi::F32>>(g);
    if (buf.has_error()) return buf.error();
    const auto gd = buf->dimensions();
    if (gd.size() != 2 || gd[0] != n) {
      return ffi::Error::InvalidArgument(
          "learnopt fused_mlp: every feature group must be [N, F_g], N as in out");
    }
    w.group[g] = buf->typed_data();
    w.width[g] = gd[1];
    nf += gd[1];
  }
  const int64_t tiles = (n + kTile - 1) / kTile, chunks = (tiles + kChunk - 1) / kChunk;
  if (nf > kMaxFeatures || w0.element_count() != nf * kHidden || b0.element_count() != kHidden ||
      w1.element_count() != kHidden * kHidden || b1.element_count() != kHidden ||
      w2d[0] != kHidden || nout < 1 || nout > kMaxOut || b2.element_count() != nout ||
      od[0] != nout || hd.size() != 2 || hd[1] != kHidden || (hd[0] != 0 && hd[0] != chunks)) {
    return ffi::Error::InvalidArgument(
        "learnopt fused_mlp: expects w0 [F, 32] (F <= 64: the groups' widths summed), b0 [32], "
        "w1 [32, 32], b1 [32], w2 [32, K] (K <= 4), b2 [K], out [K, N], "
        "hidden sums [ceil(N / 1024), 32] or [0, 32]");
  }
  // With norm_eps >= 0, every feature column is first divided by its root mean square
  // over the N rows: a pass of per-chunk sums of squares (added up here in chunk order,
  // so the result does not depend on the threads), folded into w0's rows.
  std::vector<float> w0_scaled;
  if (norm_eps >= 0.0f && n > 0) {
    std::vector<float> sq(chunks * nf);
    ParallelFor(pool, chunks, [&](int64_t c) {
      const int64_t r0 = c * kChunkRows;
      ChunkSquares(w, r0, std::min(kChunkRows, n - r0), sq.data() + c * nf);
    });
    w0_scaled.resize(nf * kHidden);
    for (int64_t f = 0; f < nf; ++f) {
      double total = 0.0;
      for (int64_t c = 0; c < chunks; ++c) total += sq[c * nf + f];
      const float mean = static_cast<float>(total / static_cast<double>(n));
      const float scale = 1.0f / std::sqrt(mean + norm_eps);
      for (int64_t j = 0; j < kHidden; ++j) w0_scaled[f * kHidden + j] = w.w0[f * kHidden + j] * scale;
    }
    w.w0 = w0_scaled.data();
  }
  float* o = out->typed_data();
  float* sums = hd[0] == 0 ? nullptr : hsum->typed_data();
  ParallelFor(pool, chunks, [&](int64_t c) {
    const int64_t lo = c * kChunk, hi = std::min(tiles, lo + kChunk);
    if (sums == nullptr) {
      Dispatch<false>(w, lo, hi, n, o, nullptr);
      return;
    }
    alignas(64) float lanes[kHidden][kLanes] = {};
    Dispatch<true>(w, lo, hi, n, o, lanes);
    for (int64_t j = 0; j < kHidden; ++j) {
      float s = 0.0f;
      for (int64_t l = 0; l < kLanes; ++l) s += lanes[j][l];
      sums[c * kHidden + j] = s;
    }
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(LearnoptFusedMlp, FusedMlpImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("norm_eps"));
