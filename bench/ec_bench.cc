// tenax bench ec: Reed-Solomon throughput of the store's coding path
// against raw ISA-L calls on the same buffers (issue 12, "Numbers").
//
// Buffers: `stripes` stripes of k data + m parity chunks of `chunk` bytes,
// filled once with random bytes. Each measurement codes every stripe once;
// the rounds alternate raw / store (ABBA) and the median round counts.
//  - raw encode: ec_encode_data with tables built once.
//  - store encode: store::ReedSolomon::Encode per stripe (it builds its
//    tables per call, as the ingest path calls it).
//  - raw decode: data chunk 0 and parity chunk k lost; decode tables (the
//    inverse of the survivors' rows) built once, ec_encode_data per stripe.
//  - store decode: ReedSolomon::Reconstruct per stripe (inverse and tables
//    per call, as a degraded read does).
//  - store encode + CRC: Encode plus the CRC-32C of every chunk, what
//    writing a stripe's chunk files costs before the disk.
// Throughput = data bytes (k x chunk per stripe) / seconds.
#include <isa-l/erasure_code.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <random>

#include "bench_common.h"
#include "tenax/core/checksum.h"
#include "tenax/store/reed_solomon.h"

namespace tenax::bench {
namespace {

struct EcArgs {
  bool quick = false;
  std::string json_path;
  int64_t k = 4, m = 2;
  int64_t chunk_bytes = 1 << 20;
  int64_t stripes = 0;  // 0 = 16 quick, 64 full
  int64_t rounds = 0;   // 0 = 3 quick, 7 full
};

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Status RunEc(const EcArgs& a) {
  const int k = static_cast<int>(a.k), m = static_cast<int>(a.m), n = k + m;
  if (m < 2) return InvalidArgument("tenax bench ec: the decode measurement loses 2 chunks: use --m >= 2");
  TENAX_ASSIGN_OR_RETURN(store::ReedSolomon rs, store::ReedSolomon::Create(k, m));
  const size_t len = static_cast<size_t>(a.chunk_bytes);
  const int64_t stripes = a.stripes > 0 ? a.stripes : (a.quick ? 16 : 64);
  const int64_t rounds = a.rounds > 0 ? a.rounds : (a.quick ? 3 : 7);
  std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(stripes * n), std::vector<uint8_t>(len));
  std::mt19937_64 rng(1);
  for (auto& b : buffers) {
    for (size_t i = 0; i + 8 <= len; i += 8) {
      const uint64_t v = rng();
      std::memcpy(b.data() + i, &v, 8);
    }
  }
  auto chunks = [&](int64_t s) {
    std::vector<uint8_t*> p(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = buffers[static_cast<size_t>(s * n + i)].data();
    return p;
  };

  // Raw ISA-L: the same Cauchy matrix, tables built once.
  std::vector<uint8_t> matrix(static_cast<size_t>(n * k)), enc_tables(static_cast<size_t>(32 * k * m));
  gf_gen_cauchy1_matrix(matrix.data(), n, k);
  ec_init_tables(k, m, matrix.data() + k * k, enc_tables.data());
  // Decode of chunks 0 and k from survivors 1..k-1, k+1: rows of the
  // inverse of the survivors' matrix.
  std::vector<int> survivors;
  for (int i = 1; i < n && static_cast<int>(survivors.size()) < k; ++i) {
    if (i != k) survivors.push_back(i);
  }
  std::vector<uint8_t> sub(static_cast<size_t>(k * k)), inverse(static_cast<size_t>(k * k));
  for (int r = 0; r < k; ++r) {
    for (int c = 0; c < k; ++c) sub[static_cast<size_t>(r * k + c)] = matrix[static_cast<size_t>(survivors[static_cast<size_t>(r)] * k + c)];
  }
  if (gf_invert_matrix(sub.data(), inverse.data(), k) != 0) return Internal("tenax bench ec: singular survivors' matrix");
  std::vector<uint8_t> decode_rows(static_cast<size_t>(2 * k));
  const int lost[2] = {0, k};
  for (int i = 0; i < 2; ++i) {
    for (int c = 0; c < k; ++c) {
      uint8_t v = 0;
      for (int t = 0; t < k; ++t) v ^= gf_mul(matrix[static_cast<size_t>(lost[i] * k + t)], inverse[static_cast<size_t>(t * k + c)]);
      decode_rows[static_cast<size_t>(i * k + c)] = v;
    }
  }
  std::vector<uint8_t> dec_tables(static_cast<size_t>(32 * k * 2));
  ec_init_tables(k, 2, decode_rows.data(), dec_tables.data());

  auto timed = [&](auto&& body) {
    const auto t0 = Clock::now();
    for (int64_t s = 0; s < stripes; ++s) body(s);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  auto raw_encode = [&](int64_t s) {
    auto p = chunks(s);
    ec_encode_data(static_cast<int>(len), k, m, enc_tables.data(), p.data(), p.data() + k);
  };
  auto store_encode = [&](int64_t s) {
    auto p = chunks(s);
    rs.Encode(len, p.data(), p.data() + k);
  };
  uint32_t crc_sink = 0;
  auto store_encode_crc = [&](int64_t s) {
    auto p = chunks(s);
    rs.Encode(len, p.data(), p.data() + k);
    for (int i = 0; i < n; ++i) crc_sink ^= Crc32c(std::span<const uint8_t>(p[static_cast<size_t>(i)], len));
  };
  // Decode writes chunks 0 and k back: identical bytes, so every round
  // starts from the same stripe (checked once below).
  auto raw_decode = [&](int64_t s) {
    auto p = chunks(s);
    std::vector<uint8_t*> in(static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) in[static_cast<size_t>(i)] = p[static_cast<size_t>(survivors[static_cast<size_t>(i)])];
    uint8_t* out[2] = {p[0], p[static_cast<size_t>(k)]};
    ec_encode_data(static_cast<int>(len), k, 2, dec_tables.data(), in.data(), out);
  };
  std::vector<bool> present(static_cast<size_t>(n), true);
  present[0] = false;
  present[static_cast<size_t>(k)] = false;
  Status decode_status = Status::Ok();
  auto store_decode = [&](int64_t s) {
    auto p = chunks(s);
    if (Status st = rs.Reconstruct(len, present, p.data()); !st.ok()) decode_status = st;
  };

  // Correctness first: both paths give the same parity and rebuild the
  // lost chunks bit-exact.
  raw_encode(0);
  const std::vector<uint8_t> parity0 = buffers[static_cast<size_t>(k)];
  store_encode(0);
  if (buffers[static_cast<size_t>(k)] != parity0) return Internal("tenax bench ec: store parity differs from raw ISA-L");
  for (int64_t s = 0; s < stripes; ++s) raw_encode(s);
  const std::vector<uint8_t> data0 = buffers[0];
  std::fill(buffers[0].begin(), buffers[0].end(), 0);
  std::fill(buffers[static_cast<size_t>(k)].begin(), buffers[static_cast<size_t>(k)].end(), 0);
  store_decode(0);
  TENAX_RETURN_IF_ERROR(decode_status);
  if (buffers[0] != data0 || buffers[static_cast<size_t>(k)] != parity0) {
    return Internal("tenax bench ec: the store's decode did not rebuild the lost chunks bit-exact");
  }

  std::vector<double> re, se, sc, rd, sd;
  for (int64_t r = 0; r < rounds; ++r) {
    const bool raw_first = r % 2 == 0;  // ABBA
    if (raw_first) re.push_back(timed(raw_encode));
    se.push_back(timed(store_encode));
    if (!raw_first) re.push_back(timed(raw_encode));
    sc.push_back(timed(store_encode_crc));
    if (raw_first) rd.push_back(timed(raw_decode));
    sd.push_back(timed(store_decode));
    if (!raw_first) rd.push_back(timed(raw_decode));
    std::fprintf(stderr, "ec: round %lld/%lld done\n", static_cast<long long>(r + 1), static_cast<long long>(rounds));
  }
  TENAX_RETURN_IF_ERROR(decode_status);
  const double gb = static_cast<double>(stripes) * k * static_cast<double>(len) / 1e9;
  const double isal_encode = gb / Median(re), store_encode_gbps = gb / Median(se), isal_decode = gb / Median(rd),
               store_decode_gbps = gb / Median(sd), store_crc = gb / Median(sc);
  nlohmann::json report = {
      {"benchmark", "ec"},
      {"quick", a.quick},
      {"k", k},
      {"m", m},
      {"chunk_bytes", a.chunk_bytes},
      {"stripes", stripes},
      {"rounds", rounds},
      {"isal_encode_gbps", isal_encode},
      {"store_encode_gbps", store_encode_gbps},
      {"isal_decode_gbps", isal_decode},
      {"store_decode_gbps", store_decode_gbps},
      {"store_encode_with_crc_gbps", store_crc},
      {"encode_ratio", store_encode_gbps / isal_encode},
      {"decode_ratio", store_decode_gbps / isal_decode},
      {"crc_sink", crc_sink},
      {"targets",
       {{"store_encode_at_least_0_8x_isal", store_encode_gbps >= 0.8 * isal_encode},
        {"store_decode_at_least_0_8x_isal", store_decode_gbps >= 0.8 * isal_decode}}}};
  std::printf("%s\n", report.dump(2).c_str());
  return WriteJsonReport(a.json_path, report);
}

}  // namespace

void AddEcBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<EcArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "ec",
      "Reed-Solomon encode and decode throughput of the store's coding path vs raw ISA-L calls on the same buffers",
      "16 stripes, 3 rounds (a few seconds)", a->quick, a->json_path, [a] { return RunEc(*a); }, exit_code);
  cmd->add_option("--k", a->k, "Data chunks per stripe")->check(CLI::Range(int64_t{1}, int64_t{200}))->capture_default_str();
  cmd->add_option("--m", a->m, "Parity chunks per stripe")->check(CLI::Range(int64_t{2}, int64_t{55}))->capture_default_str();
  cmd->add_option("--chunk-bytes", a->chunk_bytes, "Bytes per chunk")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 28))
      ->capture_default_str();
  cmd->add_option("--stripes", a->stripes, "Stripes coded per measurement (default 16 quick, 64 full)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  cmd->add_option("--rounds", a->rounds, "Rounds of every measurement; the median counts (default 3 quick, 7 full)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
}

}  // namespace tenax::bench
