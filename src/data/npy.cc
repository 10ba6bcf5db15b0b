#include "tenax/data/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "tenax/core/files.h"

namespace tenax {
namespace {

static_assert(std::endian::native == std::endian::little, "the .npy decoder assumes a little-endian host");

constexpr std::array<uint8_t, 6> kMagic = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kMagicAndVersion = 8;
constexpr size_t kMaxPrefix = kMagicAndVersion + 4;  // + a uint32 header length
constexpr const char* kSupported = "uint8 ('|u1'), int32 ('<i4'), int64 ('<i8') and float32 ('<f4')";

std::string Hex(uint8_t b) {
  static const char* kDigits = "0123456789abcdef";
  return std::string("0x") + kDigits[b >> 4] + kDigits[b & 15];
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The header as the user would see it: printable ASCII, the rest escaped,
// cut short so one message stays one line.
std::string Excerpt(std::string_view text) {
  constexpr size_t kMax = 80;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += "\\x" + Hex(c).substr(2);
    }
  }
  if (text.size() > kMax) out += "...";
  return out;
}

// A value of the header dict: the only literals numpy writes there.
struct Value {
  enum Kind { kString, kBool, kTuple, kOther } kind = kString;
  std::string text;
  bool flag = false;
  std::vector<int64_t> ints;
};

// A parser for the header's Python literal: {'key': value, ...} where a value
// is a quoted string, True/False or a tuple of non-negative ints.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  // Fills `error` with what is wrong and where.
  bool ParseDict(std::vector<std::pair<std::string, Value>>& out, std::string& error) {
    if (!Eat('{')) return Fail("expected '{'", error);
    while (true) {
      if (Eat('}')) break;
      std::string key;
      if (!ParseString(key)) return Fail("expected a quoted key", error);
      if (!Eat(':')) return Fail("expected ':' after '" + key + "'", error);
      Value v;
      if (!ParseValue(v, error)) return false;
      out.emplace_back(std::move(key), std::move(v));
      if (Eat(',')) continue;
      if (Eat('}')) break;
      return Fail("expected ',' or '}'", error);
    }
    Space();
    if (pos_ != s_.size()) return Fail("unexpected text after the dict", error);
    return true;
  }

 private:
  void Space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Eat(char c) {
    Space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool EatWord(std::string_view w) {
    Space();
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  bool Fail(const std::string& what, std::string& error) const {
    error = what + " at byte " + std::to_string(pos_) + " of the header";
    return false;
  }
  bool ParseString(std::string& out) {
    Space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    const char quote = s_[pos_];
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return false;
    for (size_t i = pos_ + 1; i < end; ++i) {
      const auto c = static_cast<uint8_t>(s_[i]);
      if (c < 0x20 || c >= 0x7f || c == '\\') return false;  // no escapes in the names numpy writes
    }
    out.assign(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }
  bool ParseInt(int64_t& out, std::string& error) {
    Space();
    if (pos_ < s_.size() && s_[pos_] == '-') return Fail("negative dimension", error);
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(s_[pos_] - '0');
      if (v > (uint64_t{1} << 62)) return Fail("dimension too large", error);
      ++pos_;
    }
    if (pos_ == start) return Fail("expected a dimension", error);
    out = static_cast<int64_t>(v);
    return true;
  }
  bool ParseValue(Value& v, std::string& error) {
    Space();
    if (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"')) {
      v.kind = Value::kString;
      return ParseString(v.text) || Fail("malformed string", error);
    }
    for (bool flag : {true, false}) {
      if (EatWord(flag ? "True" : "False")) {
        v.kind = Value::kBool;
        v.flag = flag;
        return true;
      }
    }
    if (Eat('(')) {
      v.kind = Value::kTuple;
      if (Eat(')')) return true;
      while (true) {
        if (v.ints.size() == kMaxNpyRank)
          return Fail("more than " + std::to_string(kMaxNpyRank) + " dimensions", error);
        int64_t d = 0;
        if (!ParseInt(d, error)) return false;
        v.ints.push_back(d);
        if (Eat(',')) {
          if (Eat(')')) return true;
          continue;
        }
        // Python reads "(3)" as the int 3, not a tuple; numpy refuses it too.
        if (Eat(')')) return v.ints.size() > 1 || Fail("a one-element shape needs a trailing comma", error);
        return Fail("expected ',' or ')' in the shape", error);
      }
    }
    // A list (a structured dtype's descr): skipped whole, refused by its key.
    if (pos_ < s_.size() && s_[pos_] == '[') {
      v.kind = Value::kOther;
      return SkipBracketed() || Fail("unbalanced brackets", error);
    }
    return Fail("expected a string, True, False or a tuple", error);
  }
  // Skips from '[' to its matching ']' over nested brackets and strings.
  bool SkipBracketed() {
    int depth = 0;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '\'' || c == '"') {
        std::string ignored;
        if (!ParseString(ignored)) return false;
        continue;
      }
      if (c == '[' || c == '(') ++depth;
      if (c == ']' || c == ')') --depth;
      ++pos_;
      if (depth == 0) return true;
      if (depth < 0) return false;
    }
    return false;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

Result<NpyDtype> ParseDescr(const std::string& descr, const std::string& name) {
  if (descr == "|u1") return NpyDtype::kUint8;
  if (descr == "<i4") return NpyDtype::kInt32;
  if (descr == "<i8") return NpyDtype::kInt64;
  if (descr == "<f4") return NpyDtype::kFloat32;
  if (!descr.empty() && descr[0] == '>') {
    return DataLoss(name + ": element type '" + descr + "' is big-endian; supported: little-endian " + kSupported +
                    " (convert with arr.astype(arr.dtype.newbyteorder('<')))");
  }
  return DataLoss(name + ": element type '" + descr + "' is not supported; supported: " + kSupported);
}

}  // namespace

const char* NpyDtypeName(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kUint8:
      return "uint8";
    case NpyDtype::kInt32:
      return "int32";
    case NpyDtype::kInt64:
      return "int64";
    case NpyDtype::kFloat32:
      return "float32";
  }
  return "?";
}

size_t NpyItemSize(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kUint8:
      return 1;
    case NpyDtype::kInt32:
    case NpyDtype::kFloat32:
      return 4;
    case NpyDtype::kInt64:
      return 8;
  }
  return 1;
}

namespace {
int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // bounded by the decoder
  return n;
}
}  // namespace

int64_t NpyHeader::count() const { return Product(shape); }
int64_t NpyArray::count() const { return Product(shape); }

Result<NpyHeader> DecodeNpyHeader(std::span<const uint8_t> bytes, const std::string& name, size_t max_bytes) {
  const size_t magic_seen = std::min(bytes.size(), kMagic.size());
  if (!std::equal(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(magic_seen), kMagic.begin())) {
    std::string first;
    for (size_t i = 0; i < std::min<size_t>(bytes.size(), 6); ++i) first += (i ? " " : "") + Hex(bytes[i]);
    return DataLoss(name + ": wrong magic number (first bytes " + first + ", expected 0x93 'NUMPY'): not a .npy file");
  }
  if (bytes.size() < kMagicAndVersion + 2) {
    return DataLoss(name + ": truncated: " + std::to_string(bytes.size()) + " bytes, a .npy header needs at least 10");
  }
  const uint8_t major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    return DataLoss(name + ": unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                    " (known: 1.0, 2.0, 3.0)");
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < kMagicAndVersion + length_bytes) return DataLoss(name + ": truncated inside the .npy header");
  uint64_t header_len = 0;
  for (size_t i = 0; i < length_bytes; ++i) header_len |= uint64_t{bytes[kMagicAndVersion + i]} << (8 * i);
  if (header_len > kMaxNpyHeaderBytes) {
    return DataLoss(name + ": .npy header is " + std::to_string(header_len) + " bytes, more than the limit of " +
                    std::to_string(kMaxNpyHeaderBytes));
  }
  const size_t prefix = kMagicAndVersion + length_bytes;
  if (bytes.size() < prefix + header_len) {
    return DataLoss(name + ": truncated inside the .npy header (" + std::to_string(header_len) + " bytes promised, " +
                    std::to_string(bytes.size() - prefix) + " present)");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + prefix), header_len);

  std::vector<std::pair<std::string, Value>> entries;
  std::string error;
  if (!HeaderParser(text).ParseDict(entries, error)) {
    return DataLoss(name + ": malformed .npy header: " + error + ": '" + Excerpt(text) + "'");
  }
  std::optional<Value> descr, fortran, shape;
  for (auto& [key, value] : entries) {
    std::optional<Value>* slot = key == "descr"           ? &descr
                                 : key == "fortran_order" ? &fortran
                                 : key == "shape"         ? &shape
                                                          : nullptr;
    if (slot == nullptr) return DataLoss(name + ": .npy header has an unexpected key '" + key + "'");
    if (slot->has_value()) return DataLoss(name + ": .npy header repeats the key '" + key + "'");
    *slot = std::move(value);
  }
  for (const auto& [key, slot] : {std::pair<const char*, const std::optional<Value>*>{"descr", &descr},
                                  {"fortran_order", &fortran},
                                  {"shape", &shape}}) {
    if (!slot->has_value()) return DataLoss(name + ": .npy header lacks the key '" + key + "'");
  }
  if (descr->kind != Value::kString) {
    return DataLoss(name + ": 'descr' is not a type string like '<f4' (structured dtypes are not supported)");
  }
  if (fortran->kind != Value::kBool) return DataLoss(name + ": 'fortran_order' is not True or False");
  if (shape->kind != Value::kTuple) return DataLoss(name + ": 'shape' is not a tuple");

  NpyHeader h;
  TENAX_ASSIGN_OR_RETURN(h.dtype, ParseDescr(descr->text, name));
  if (fortran->flag) {
    return DataLoss(name + ": fortran_order is True (column-major data, shape " + ShapeText(shape->ints) +
                    "); save a C-ordered array: np.save(path, np.ascontiguousarray(arr))");
  }
  h.shape = std::move(shape->ints);
  const uint64_t item = NpyItemSize(h.dtype);
  const uint64_t max_count = max_bytes / item;
  uint64_t count = 1;
  const bool empty = std::find(h.shape.begin(), h.shape.end(), 0) != h.shape.end();
  for (int64_t d : h.shape) {
    if (empty) {
      count = 0;
      break;
    }
    if (static_cast<uint64_t>(d) > max_count / count) {
      return DataLoss(name + ": shape " + ShapeText(h.shape) + " of " + NpyDtypeName(h.dtype) +
                      " describes more than the limit of " + std::to_string(max_bytes) + " bytes");
    }
    count *= static_cast<uint64_t>(d);
  }
  h.data_offset = prefix + header_len;
  h.data_bytes = count * item;
  return h;
}

namespace {

Status CheckPayloadSize(const NpyHeader& h, uint64_t file_bytes, const std::string& name) {
  const uint64_t payload = file_bytes - h.data_offset;
  if (payload < h.data_bytes) {
    return DataLoss(name + ": truncated: header promises " + std::to_string(h.data_bytes) + " data bytes, file has " +
                    std::to_string(payload));
  }
  if (payload > h.data_bytes) {
    return DataLoss(name + ": " + std::to_string(payload - h.data_bytes) + " unexpected bytes after the data");
  }
  return Status::Ok();
}

}  // namespace

Result<NpyArray> DecodeNpy(std::span<const uint8_t> bytes, const std::string& name, size_t max_bytes) {
  TENAX_ASSIGN_OR_RETURN(NpyHeader h, DecodeNpyHeader(bytes, name, max_bytes));
  TENAX_RETURN_IF_ERROR(CheckPayloadSize(h, bytes.size(), name));
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = std::move(h.shape);
  a.data.assign(bytes.begin() + static_cast<ptrdiff_t>(h.data_offset), bytes.end());
  return a;
}

Result<NpyArray> ReadNpyFile(const std::string& path, size_t max_bytes) {
  const size_t file_limit = max_bytes > std::numeric_limits<size_t>::max() - kMaxPrefix - kMaxNpyHeaderBytes
                                ? std::numeric_limits<size_t>::max()
                                : max_bytes + kMaxPrefix + kMaxNpyHeaderBytes;
  TENAX_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path, file_limit));
  TENAX_ASSIGN_OR_RETURN(NpyHeader h, DecodeNpyHeader(bytes, path, max_bytes));
  TENAX_RETURN_IF_ERROR(CheckPayloadSize(h, bytes.size(), path));
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = std::move(h.shape);
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(h.data_offset));  // in place: no second copy
  a.data = std::move(bytes);
  return a;
}

Result<NpyHeader> ReadNpyFileHeader(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(path + ": no such file");
    return IoError(path + ": " + ErrnoMessage(err));
  }
  struct stat st {};
  std::vector<uint8_t> head(kMaxPrefix + kMaxNpyHeaderBytes);
  size_t got = 0;
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (S_ISDIR(st.st_mode)) {
    err = EISDIR;
  } else {
    while (got < head.size()) {
      const ssize_t n = ::read(fd, head.data() + got, head.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = errno;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (err != 0) return IoError(path + ": " + ErrnoMessage(err));
  head.resize(got);
  TENAX_ASSIGN_OR_RETURN(NpyHeader h, DecodeNpyHeader(head, path, max_bytes));
  TENAX_RETURN_IF_ERROR(CheckPayloadSize(h, static_cast<uint64_t>(st.st_size), path));
  return h;
}

// ---- A labelled image set ----

namespace {

// Arrays built by hand (not decoded) could disagree with their shape.
bool SizeMatchesShape(const NpyArray& a) {
  uint64_t count = 1;
  for (int64_t d : a.shape) {
    if (d < 0 || (d != 0 && count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))) return false;
    count *= static_cast<uint64_t>(d);
  }
  return count <= std::numeric_limits<uint64_t>::max() / NpyItemSize(a.dtype) &&
         count * NpyItemSize(a.dtype) == a.data.size();
}

int64_t LabelAt(const NpyArray& labels, size_t i) {
  const uint8_t* p = labels.data.data() + i * NpyItemSize(labels.dtype);
  switch (labels.dtype) {
    case NpyDtype::kUint8:
      return *p;
    case NpyDtype::kInt32: {
      int32_t v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case NpyDtype::kInt64: {
      int64_t v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case NpyDtype::kFloat32:
      break;
  }
  return -1;
}

}  // namespace

Result<std::vector<int64_t>> NpyLabels(const NpyArray& labels, const std::string& name) {
  if (!SizeMatchesShape(labels)) return DataLoss(name + ": data size does not match the shape");
  if (labels.shape.size() != 1) {
    return DataLoss(name + ": labels need 1 dimension (N), found shape " + ShapeText(labels.shape) +
                    (labels.shape.size() >= 3 ? " (is this an images file?)" : ""));
  }
  if (labels.dtype == NpyDtype::kFloat32) {
    return DataLoss(name + ": labels must be integers (uint8, int32 or int64), found float32");
  }
  std::vector<int64_t> out(static_cast<size_t>(labels.shape[0]));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t label = LabelAt(labels, i);
    if (label < 0 || label >= kMaxNpyClasses) {
      return DataLoss(
          name + ": mislabelled: label " + std::to_string(label) + " at index " + std::to_string(i) +
          (label < 0 ? " is negative" : " is beyond the limit of " + std::to_string(kMaxNpyClasses) + " classes"));
    }
    out[i] = label;
  }
  return out;
}

Result<NpySamples> MakeNpySamples(NpyArray images, NpyArray labels, const std::string& images_name,
                                  const std::string& labels_name) {
  if (!SizeMatchesShape(images)) return DataLoss(images_name + ": data size does not match the shape");
  const size_t rank = images.shape.size();
  if (rank != 3 && rank != 4) {
    return DataLoss(images_name + ": images need 4 dimensions (N, C, H, W) or 3 (N, H, W), found shape " +
                    ShapeText(images.shape) + (rank == 1 ? " (is this a labels file?)" : ""));
  }
  if (images.dtype != NpyDtype::kUint8 && images.dtype != NpyDtype::kFloat32) {
    return DataLoss(images_name + ": images must be uint8 or float32, found " + NpyDtypeName(images.dtype));
  }
  if (rank == 3) images.shape.insert(images.shape.begin() + 1, 1);
  if (std::find(images.shape.begin() + 1, images.shape.end(), 0) != images.shape.end()) {
    return DataLoss(images_name + ": images of shape " + ShapeText(images.shape) + " have no pixels");
  }
  TENAX_ASSIGN_OR_RETURN(std::vector<int64_t> widened, NpyLabels(labels, labels_name));
  const int64_t n = images.shape[0];
  if (static_cast<int64_t>(widened.size()) != n) {
    return DataLoss(images_name + " holds " + std::to_string(n) + " images but " + labels_name + " holds " +
                    std::to_string(widened.size()) + " labels");
  }
  if (images.dtype == NpyDtype::kFloat32) {
    const size_t values = images.data.size() / sizeof(float);
    const size_t per_sample = n == 0 ? 1 : values / static_cast<size_t>(n);
    for (size_t i = 0; i < values; ++i) {
      float v;
      std::memcpy(&v, images.data.data() + i * sizeof v, sizeof v);
      if (!std::isfinite(v)) {
        return DataLoss(images_name + ": value " + std::to_string(v) + " of sample " + std::to_string(i / per_sample) +
                        " is not finite");
      }
    }
  }
  NpySamples out;
  out.images = std::move(images);
  out.labels = std::move(widened);
  return out;
}

PixelStatistics Uint8PixelStatistics(std::span<const uint8_t> pixels) {
  std::array<uint64_t, 256> histogram{};
  for (uint8_t p : pixels) ++histogram[p];
  PixelStatistics s;
  if (pixels.empty()) return s;
  const double n = static_cast<double>(pixels.size());
  double sum = 0;
  for (size_t v = 0; v < histogram.size(); ++v)
    sum += static_cast<double>(histogram[v]) * (static_cast<double>(v) / 255.0);
  s.mean = sum / n;
  double squares = 0;
  for (size_t v = 0; v < histogram.size(); ++v) {
    const double d = static_cast<double>(v) / 255.0 - s.mean;
    squares += static_cast<double>(histogram[v]) * d * d;
  }
  const double std = std::sqrt(squares / n);
  s.std = std > 1e-12 ? std : 1.0;
  return s;
}

}  // namespace tenax
