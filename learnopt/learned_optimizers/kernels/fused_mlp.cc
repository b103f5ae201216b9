// learnopt's fused per-element MLP for XLA:CPU, as an XLA FFI custom call.
//
// out[k, i] = (relu(relu(x[i, :] @ w0 + b0) @ w1 + b1) @ w2 + b2)[k] for every row i of
// x = concat(groups, axis=1), the groups [N, F_g] given separately (never concatenated in
// memory): two hidden layers of 32 units, 1 to 4 outputs, float32. A second result holds
// the second hidden layer summed over rows, per chunk of kChunk * kTile rows ([C, 32]:
// the caller sums the C rows), for the outputs that are only needed as element means
// (RNNMLPLOpt's); given [0, 32], the sums are not computed. Each tile of 64 rows
// keeps its hidden units in registers and L1 instead of writing them out, which XLA:CPU's
// GEMM kernels do for [N, 32] @ [32, 32] products (and run at about a third of their
// large-matmul rate). Compiled on the user's machine by
// learnopt/learned_optimizers/fused_kernel.py (-O3 -march=native); the same function as
// per_element's other forms (tests/test_fused_kernel.py), forward only: derivatives are
// taken through the blocked matrix-product form.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kHidden = 32;  // both hidden layers
constexpr int64_t kMaxOut = 4;   // outputs
constexpr int64_t kTile = 64;    // rows per tile: 4 AVX-512 vectors
constexpr int64_t kUnits = 4;    // second-layer units accumulated together
constexpr int64_t kLanes = 16;   // running hidden sums per unit: one AVX-512 vector

constexpr int64_t kMaxGroups = 64;

struct Weights {
  const float *w0, *b0, *w1, *b1, *w2, *b2;
  int64_t nout;
  int64_t ngroups;
  const float* group[kMaxGroups];  // [N, width[g]] row-major
  int64_t width[kMaxGroups];
};

// One tile of rows. kSum: also add the second hidden layer into hsum, per-lane running
// sums [kHidden][kLanes] (vector adds; a scalar sum per unit would be a serial chain of
// dependent adds). Not inlined: inlined into its callers (eight instantiations), GCC 12
// compiled it to 1.6x slower code (measured: 14 ms against 10 ms on 401,408 rows).
template <int64_t kOut, bool kSum>
[[gnu::noinline]] void Tile(int64_t i0, int64_t len, const Weights& w, float* out, int64_t n,
          float (*__restrict hsum)[kLanes]) {
  alignas(64) float h1[kHidden][kTile];
  alignas(64) float o[kOut][kTile];
  alignas(64) float xt[kTile];
  for (int64_t j = 0; j < kHidden; ++j) {
    for (int64_t t = 0; t < kTile; ++t) h1[j][t] = w.b0[j];
  }
  int64_t f = 0;  // the feature's row of w0
  for (int64_t g = 0; g < w.ngroups; ++g) {
    const int64_t width = w.width[g];
    const float* rows = w.group[g] + i0 * width;
    for (int64_t col = 0; col < width; ++col, ++f) {
      if (len == kTile) {
        for (int64_t t = 0; t < kTile; ++t) xt[t] = rows[t * width + col];
      } else {
        for (int64_t t = 0; t < kTile; ++t) xt[t] = 0.0f;
        for (int64_t t = 0; t < len; ++t) xt[t] = rows[t * width + col];
      }
      for (int64_t j = 0; j < kHidden; ++j) {
        const float c = w.w0[f * kHidden + j];
        for (int64_t t = 0; t < kTile; ++t) h1[j][t] += c * xt[t];
      }
    }
  }
  for (int64_t j = 0; j < kHidden; ++j) {
    for (int64_t t = 0; t < kTile; ++t) h1[j][t] = std::max(h1[j][t], 0.0f);
  }
  for (int64_t k = 0; k < kOut; ++k) {
    for (int64_t t = 0; t < kTile; ++t) o[k][t] = w.b2[k];
  }
  for (int64_t j0 = 0; j0 < kHidden; j0 += kUnits) {
    alignas(64) float acc[kUnits][kTile];
    for (int64_t u = 0; u < kUnits; ++u) {
      for (int64_t t = 0; t < kTile; ++t) acc[u][t] = w.b1[j0 + u];
    }
    for (int64_t i = 0; i < kHidden; ++i) {
      for (int64_t u = 0; u < kUnits; ++u) {
        const float c = w.w1[i * kHidden + j0 + u];
        for (int64_t t = 0; t < kTile; ++t) acc[u][t] += c * h1[i][t];
      }
    }
    for (int64_t u = 0; u < kUnits; ++u) {
      for (int64_t t = 0; t < kTile; ++t) acc[u][t] = std::max(acc[u][t], 0.0f);
      if constexpr (kSum) {
        // Rows past len (padding, never written out) are left out of the sum.
        for (int64_t t = len; t < kTile; ++t) acc[u][t] = 0.0f;
        for (int64_t l = 0; l < kLanes; ++l) {
          hsum[j0 + u][l] += (acc[u][l] + acc[u][l + kLanes]) +
                             (acc[u][l + 2 * kLanes] + acc[u][l + 3 * kLanes]);
        }
      }
      for (int64_t k = 0; k < kOut; ++k) {
        const float c = w.w2[(j0 + u) * kOut + k];
        for (int64_t t = 0; t < kTile; ++t) o[k][t] += c * acc[u][t];
      }
    }
  }
  for (int64_t k = 0; k < kOut; ++k) {
    for (int64_t t = 0; t < len; ++t) out[k * n + i0 + t] = o[k][t];
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

struct Job {
  Weights w;
  float* out;
  float* hsum;  // [chunks, kHidden], or null: not asked for
  int64_t n, tiles, chunks;
  std::atomic<int64_t> next{0}, finished{0};

  template <bool kSum>
  void Dispatch(int64_t lo, int64_t hi, float (*lanes)[kLanes]) {
    switch (w.nout) {
      case 1: Tiles<1, kSum>(lo, hi, n, w, out, lanes); break;
      case 2: Tiles<2, kSum>(lo, hi, n, w, out, lanes); break;
      case 3: Tiles<3, kSum>(lo, hi, n, w, out, lanes); break;
      default: Tiles<4, kSum>(lo, hi, n, w, out, lanes); break;
    }
  }

  void Run() {
    for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
      const int64_t lo = c * kChunk, hi = std::min(tiles, lo + kChunk);
      if (hsum == nullptr) {
        Dispatch<false>(lo, hi, nullptr);
      } else {
        alignas(64) float lanes[kHidden][kLanes] = {};
        Dispatch<true>(lo, hi, lanes);
        for (int64_t j = 0; j < kHidden; ++j) {
          float s = 0.0f;
          for (int64_t l = 0; l < kLanes; ++l) s += lanes[j][l];
          hsum[c * kHidden + j] = s;
        }
      }
      finished.fetch_add(1, std::memory_order_release);
    }
  }
};

ffi::Error FusedMlpImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> w0, ffi::Buffer<ffi::F32> b0,
                        ffi::Buffer<ffi::F32> w1, ffi::Buffer<ffi::F32> b1,
                        ffi::Buffer<ffi::F32> w2, ffi::Buffer<ffi::F32> b2,
                        ffi::RemainingArgs groups, ffi::ResultBuffer<ffi::F32> out,
                        ffi::ResultBuffer<ffi::F32> hsum) {
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
  if (w0.element_count() != nf * kHidden || b0.element_count() != kHidden ||
      w1.element_count() != kHidden * kHidden || b1.element_count() != kHidden ||
      w2d[0] != kHidden || nout < 1 || nout > kMaxOut || b2.element_count() != nout ||
      od[0] != nout || hd.size() != 2 || hd[1] != kHidden ||
      (hd[0] != 0 && hd[0] != ((n + kTile - 1) / kTile + kChunk - 1) / kChunk)) {
    return ffi::Error::InvalidArgument(
        "learnopt fused_mlp: expects w0 [F, 32] (F: the groups' widths summed), b0 [32], "
        "w1 [32, 32], b1 [32], w2 [32, K] (K <= 4), b2 [K], out [K, N], "
        "hidden sums [ceil(N / 1024), 32] or [0, 32]");
  }
  // Chunks of tiles claimed from a shared counter by this thread and by helpers on XLA's
  // intra-op thread pool (so the kernel shares the cores with the XLA work running
  // beside it instead of oversubscribing them). This thread waits only for chunks
  // already claimed: a helper that starts late finds none left and returns.
  auto job = std::make_shared<Job>();
  job->w = w;
  job->out = out->typed_data();
  job->hsum = hd[0] == 0 ? nullptr : hsum->typed_data();
  job->n = n;
  job->tiles = (n + kTile - 1) / kTile;
  job->chunks = (job->tiles + kChunk - 1) / kChunk;
  const int64_t helpers = std::min<int64_t>(pool.num_threads(), job->chunks - 1);
  for (int64_t h = 0; h < helpers; ++h) pool.Schedule([job] { job->Run(); });
  job->Run();
  while (job->finished.load(std::memory_order_acquire) < job->chunks) std::this_thread::yield();
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
                                  .Ret<ffi::Buffer<ffi::F32>>());
