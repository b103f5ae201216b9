// learnopt's fused per-element MLP for XLA:CPU, as an XLA FFI custom call.
//
// out[k, i] = (relu(relu(x[i, :] @ w0 + b0) @ w1 + b1) @ w2 + b2)[k] for every row i of
// x = concat(groups, axis=1), the groups [N, F_g] given separately (never concatenated in
// memory): two hidden layers of 32 units, 1 to 4 outputs, float32. With norm_eps >= 0,
// each column of x is first divided by sqrt(norm_eps + mean(column^2)) (a pass of sums of
// squares, folded into w0). A second result holds the second hidden layer summed over
// rows, per chunk of 1024 rows ([C, 32]: the caller sums the C rows), for the
// outputs that are only needed as element means (RNNMLPLOpt's); given [0, 32], the sums
// are not computed. Each tile of rows (64 with AVX-512) computes its layers 4 units at a
// time in registers, the hidden layers kept in L1 instead of written out, which XLA:CPU's GEMM
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
constexpr int64_t kUnits = 4;    // units of a layer accumulated together

// The vector width the compiler targets (one register: kLanes floats) and the vectors per
// column of a tile (kVec): kUnits * kVec accumulators, plus kUnits broadcast weights and
// one input, must fit in the registers (32 with AVX-512, 16 with AVX2 and SSE; a wider
// vector type than the target's, measured, made the AVX2 build 23x slower).
#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
constexpr int64_t kVec = 4;
#elif defined(__AVX__)
constexpr int64_t kLanes = 8;
constexpr int64_t kVec = 2;
#else
constexpr int64_t kLanes = 4;
constexpr int64_t kVec = 2;
#endif
constexpr int64_t kTile = kLanes * kVec;  // rows per tile (64 with AVX-512)

constexpr int64_t kMaxGroups = 64;
constexpr int64_t kMaxFeatures = 64;  // feature columns, all groups

// The update epilogue of the step form: new_p = p - mult * out0 * exp(exp_mult * out1)
// (MLPLOpt's and RNNMLPLOpt's rule) written instead of the two outputs.
struct Step {
  const float* p = nullptr;
  float* new_p = nullptr;
  float mult = 0.0f, exp_mult = 0.0f;
};

struct Weights {
  const float *w0, *b0, *w1, *b1, *w2, *b2;
  Step step;
  int64_t nout;
  int64_t ngroups;
  const float* group[kMaxGroups];  // [N, width[g]] row-major
  int64_t width[kMaxGroups];
};

// kLanes floats: one vector register. GCC and Clang vector extensions: lane-wise
// arithmetic, a scalar operand broadcast.
typedef float V __attribute__((vector_size(kLanes * sizeof(float))));

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
#elif defined(__x86_64__)
  asm("" : "+x"(v));
#endif
}

inline V Relu(V v) { return v > 0.0f ? v : V{}; }

inline V Abs(V v) { return v < 0.0f ? -v : v; }

typedef int32_t VI __attribute__((vector_size(kLanes * sizeof(int32_t))));

// exp(x), lane-wise, to about 1 ulp: x = n ln2 + r (ln2 in two parts, |r| <= ln2 / 2),
// exp(r) by Cephes' degree-6 polynomial, 2^n applied as two powers of two (each a normal
// float, so results down to the denormals are right); inf above log(FLT_MAX), 0 below
// log of the smallest denormal, NaN kept.
inline V Exp(V x) {
  const V hi = V{} + 88.72283935546875f, lo = V{} + -103.972084045410f;
  const V xc = x > hi ? hi : (x < lo ? lo : x);
  const V shift = V{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const V nf = (xc * 1.44269504088896341f + shift) - shift;
  const V r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
  V q = V{} + 1.9875691500e-4f;
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  q = q * (r * r) + r + 1.0f;
  const VI n = __builtin_convertvector(nf, VI);
  const VI n1 = n >> 1, n2 = n - n1;
  const VI e1 = (n1 + 127) << 23, e2 = (n2 + 127) << 23;
  V s1, s2;
  std::memcpy(&s1, &e1, sizeof(V));
  std::memcpy(&s2, &e2, sizeof(V));
  V y = q * s1 * s2;
  y = x > hi ? V{} + __builtin_inff() : y;
  y = x < lo ? V{} : y;
  return y;
}

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
// per-lane running sums [kHidden][kLanes]. Not inlined: inlined into its callers (all
// instantiations), GCC 12 compiled an earlier version to 1.6x slower code.
// kStep (with kOut == 2): write the update epilogue's new_p instead of the outputs, and
// with ssum, add |delta|, |out0|, out1 and |out1| into ssum[4][kLanes].
template <int64_t kOut, bool kSum, bool kStep>
[[gnu::noinline]] void Tile(int64_t i0, int64_t len, const Weights& w, float* out, int64_t n,
                            float (*__restrict hsum)[kLanes], float (*__restrict ssum)[kLanes]) {
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
      V s = Load(hsum[j]);
      for (int64_t v = 0; v < kVec; ++v) s += h2[j][v];
      std::memcpy(hsum[j], &s, sizeof(V));
    }
  }
  V o[kOut][kVec];
  Units<kOut>(h2, kHidden, w.w2, kOut, w.b2, o);
  if constexpr (kStep) {
    static_assert(kOut == 2, "the step epilogue reads a direction and a magnitude");
    alignas(64) float p[kTile] = {};
    alignas(64) float np[kTile];
    std::memcpy(p, w.step.p + i0, len * sizeof(float));
    V sums[4] = {};
    for (int64_t v = 0; v < kVec; ++v) {
      const V d = o[0][v], a = o[1][v];
      const V delta = d * Exp(a * w.step.exp_mult) * w.step.mult;
      const V pv = Load(p + v * kLanes) - delta;
      std::memcpy(np + v * kLanes, &pv, sizeof(V));
      if (ssum != nullptr) {
        V terms[4] = {Abs(delta), Abs(d), a, Abs(a)};
        if (len < kTile) {  // rows past len left out of the sums
          VI row{};
          for (int64_t l = 0; l < kLanes; ++l) row[l] = static_cast<int32_t>(v * kLanes + l);
          for (auto& t : terms) t = row < static_cast<int32_t>(len) ? t : V{};
        }
        for (int64_t k = 0; k < 4; ++k) sums[k] += terms[k];
      }
    }
    if (ssum != nullptr) {
      for (int64_t k = 0; k < 4; ++k) {
        const V acc = Load(ssum[k]) + sums[k];
        std::memcpy(ssum[k], &acc, sizeof(V));
      }
    }
    std::memcpy(w.step.new_p + i0, np, len * sizeof(float));
    return;
  }
  for (int64_t k = 0; k < kOut; ++k) {
    float* dst = out + k * n + i0;
    if (len == kTile) {
      std::memcpy(dst, &o[k][0], sizeof(o[k]));
    } else {
      std::memcpy(dst, &o[k][0], len * sizeof(float));
    }
  }
}

template <int64_t kOut, bool kSum, bool kStep>
void Tiles(int64_t lo, int64_t hi, int64_t n, const Weights& w, float* out,
           float (*lanes)[kLanes], float (*slanes)[kLanes]) {
  for (int64_t tile = lo; tile < hi; ++tile) {
    const int64_t i0 = tile * kTile;
    Tile<kOut, kSum, kStep>(i0, std::min(kTile, n - i0), w, out, n, lanes, slanes);
  }
}

constexpr int64_t kChunkRows = 1024;  // rows per claim and per partial sum (ROWS_PER_SUM)
constexpr int64_t kChunk = kChunkRows / kTile;  // tiles per claim

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
              float (*lanes)[kLanes], float (*slanes)[kLanes]) {
  if (w.step.new_p != nullptr) {
    Tiles<2, kSum, true>(lo, hi, n, w, out, lanes, slanes);
    return;
  }
  switch (w.nout) {
    case 1: Tiles<1, kSum, false>(lo, hi, n, w, out, lanes, nullptr); break;
    case 2: Tiles<2, kSum, false>(lo, hi, n, w, out, lanes, nullptr); break;
    case 3: Tiles<3, kSum, false>(lo, hi, n, w, out, lanes, nullptr); break;
    default: Tiles<4, kSum, false>(lo, hi, n, w, out, lanes, nullptr); break;
  }
}

// Sums the per-lane running sums lanes[rows][kLanes] into dst[rows].
void SumLanes(const float (*lanes)[kLanes], int64_t rows, float* dst) {
  for (int64_t j = 0; j < rows; ++j) {
    float s = 0.0f;
    for (int64_t l = 0; l < kLanes; ++l) s += lanes[j][l];
    dst[j] = s;
  }
}

// What both handlers share: checks the shapes, normalizes (norm_eps >= 0), runs the tiles.
// With step.new_p set, out is not written (it may be empty) and ssums ([C, 4] or empty)
// receives the epilogue's per-chunk sums.
ffi::Error Run(ffi::ThreadPool& pool, Weights w, const ffi::Buffer<ffi::F32>& w0,
               const ffi::Buffer<ffi::F32>& b0, const ffi::Buffer<ffi::F32>& w1,
               const ffi::Buffer<ffi::F32>& b1, const ffi::Buffer<ffi::F32>& w2,
               const ffi::Buffer<ffi::F32>& b2, ffi::RemainingArgs& groups, int64_t n,
               float* out, ffi::ResultBuffer<ffi::F32>& hsum, float* ssums,
               float norm_eps) {
  const auto w2d = w2.dimensions();
  const auto hd = hsum->dimensions();
  if (w2d.size() != 2 || groups.size() < 1 ||
      static_cast<int64_t>(groups.size()) > kMaxGroups) {
    return ffi::Error::InvalidArgument(
        "learnopt fused_mlp: w2 [32, K] and 1-64 feature groups expected");
  }
  w.nout = w2d[1];
  w.ngroups = static_cast<int64_t>(groups.size());
  int64_t nf = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto buf = groups.get<ffi::Buffer<ffi::F32>>(g);
    if (buf.has_error()) return buf.error();
    const auto gd = buf->dimensions();
    if (gd.size() != 2 || gd[0] != n) {
      return ffi::Error::InvalidArgument(
          "learnopt fused_mlp: every feature group must be [N, F_g], N as in the result");
    }
    w.group[g] = buf->typed_data();
    w.width[g] = gd[1];
    nf += gd[1];
  }
  const int64_t tiles = (n + kTile - 1) / kTile, chunks = (tiles + kChunk - 1) / kChunk;
  if (nf > kMaxFeatures || w0.element_count() != nf * kHidden ||
      b0.element_count() != kHidden || w1.element_count() != kHidden * kHidden ||
      b1.element_count() != kHidden || w2d[0] != kHidden || w.nout < 1 || w.nout > kMaxOut ||
      (w.step.new_p != nullptr && w.nout != 2) || b2.element_count() != w.nout ||
      hd.size() != 2 || hd[1] != kHidden || (hd[0] != 0 && hd[0] != chunks)) {
    return ffi::Error::InvalidArgument(
        "learnopt fused_mlp: expects w0 [F, 32] (F <= 64: the groups' widths summed), b0 [32], "
        "w1 [32, 32], b1 [32], w2 [32, K] (K <= 4; 2 for the step form), b2 [K], "
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
      for (int64_t j = 0; j < kHidden; ++j) {
        w0_scaled[f * kHidden + j] = w.w0[f * kHidden + j] * scale;
      }
    }
    w.w0 = w0_scaled.data();
  }
  float* sums = hd[0] == 0 ? nullptr : hsum->typed_data();
  ParallelFor(pool, chunks, [&](int64_t c) {
    const int64_t lo = c * kChunk, hi = std::min(tiles, lo + kChunk);
    alignas(64) float slanes[4][kLanes] = {};
    float(*sl)[kLanes] = ssums == nullptr ? nullptr : slanes;
    if (sums == nullptr) {
      Dispatch<false>(w, lo, hi, n, out, nullptr, sl);
    } else {
      alignas(64) float lanes[kHidden][kLanes] = {};
      Dispatch<true>(w, lo, hi, n, out, lanes, sl);
      SumLanes(lanes, kHidden, sums + c * kHidden);
    }
    if (ssums != nullptr) SumLanes(slanes, 4, ssums + c * 4);
  });
  return ffi::Error::Success();
}

Weights WeightsOf(const ffi::Buffer<ffi::F32>& w0, const ffi::Buffer<ffi::F32>& b0,
                  const ffi::Buffer<ffi::F32>& w1, const ffi::Buffer<ffi::F32>& b1,
                  const ffi::Buffer<ffi::F32>& w2, const ffi::Buffer<ffi::F32>& b2) {
  Weights w{};
  w.w0 = w0.typed_data();
  w.b0 = b0.typed_data();
  w.w1 = w1.typed_data();
  w.b1 = b1.typed_data();
  w.w2 = w2.typed_data();
  w.b2 = b2.typed_data();
  return w;
}

// out [K, N]: the MLP's outputs.
ffi::Error FusedMlpImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> w0, ffi::Buffer<ffi::F32> b0,
                        ffi::Buffer<ffi::F32> w1, ffi::Buffer<ffi::F32> b1,
                        ffi::Buffer<ffi::F32> w2, ffi::Buffer<ffi::F32> b2,
                        ffi::RemainingArgs groups, ffi::ResultBuffer<ffi::F32> out,
                        ffi::ResultBuffer<ffi::F32> hsum, float norm_eps) {
  const auto od = out->dimensions();
  const auto w2d = w2.dimensions();
  if (od.size() != 2 || w2d.size() != 2 || od[0] != w2d[1]) {
    return ffi::Error::InvalidArgument("learnopt fused_mlp: out [K, N] expected (w2 [32, K])");
  }
  return Run(pool, WeightsOf(w0, b0, w1, b1, w2, b2), w0, b0, w1, b1, w2, b2, groups, od[1],
             out->typed_data(), hsum, nullptr, norm_eps);
}

// new_p [N] = p - mult * out0 * exp(exp_mult * out1) (mult: a [1] buffer), and with
// ssums [C, 4] the per-chunk sums of |delta|, |out0|, out1, |out1| ([0, 4]: not computed).
ffi::Error FusedMlpStepImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> w0,
                            ffi::Buffer<ffi::F32> b0, ffi::Buffer<ffi::F32> w1,
                            ffi::Buffer<ffi::F32> b1, ffi::Buffer<ffi::F32> w2,
                            ffi::Buffer<ffi::F32> b2, ffi::Buffer<ffi::F32> p,
                            ffi::Buffer<ffi::F32> mult, ffi::RemainingArgs groups,
                            ffi::ResultBuffer<ffi::F32> new_p, ffi::ResultBuffer<ffi::F32> hsum,
                            ffi::ResultBuffer<ffi::F32> ssums, float norm_eps, float exp_mult) {
  const int64_t n = static_cast<int64_t>(new_p->element_count());
  const auto sd = ssums->dimensions();
  const int64_t chunks = ((n + kTile - 1) / kTile + kChunk - 1) / kChunk;
  if (p.element_count() != static_cast<size_t>(n) || mult.element_count() != 1 ||
      sd.size() != 2 || sd[1] != 4 || (sd[0] != 0 && sd[0] != chunks)) {
    return ffi::Error::InvalidArgument(
        "learnopt fused_mlp step: p [N] like new_p, mult [1], step sums "
        "[ceil(N / 1024), 4] or [0, 4] expected");
  }
  Weights w = WeightsOf(w0, b0, w1, b1, w2, b2);
  w.step.p = p.typed_data();
  w.step.new_p = new_p->typed_data();
  w.step.mult = mult.typed_data()[0];
  w.step.exp_mult = exp_mult;
  return Run(pool, w, w0, b0, w1, b1, w2, b2, groups, n, nullptr, hsum,
             sd[0] == 0 ? nullptr : ssums->typed_data(), norm_eps);
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

XLA_FFI_DEFINE_HANDLER_SYMBOL(LearnoptFusedMlpStep, FusedMlpStepImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("norm_eps")
                                  .Attr<float>("exp_mult"));
