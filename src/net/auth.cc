#include "tenax/net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <stdexcept>

#include "tenax/core/files.h"
#include "tenax/net/control_codec.h"

namespace tenax::net {
namespace {

constexpr size_t kMaxSecretFileBytes = 64 * 1024;

// The secret in $TENAX_SECRET_FILE's file; "" when the variable is unset.
Result<std::string> SecretFromFile() {
  const char* path = std::getenv(kSecretFileEnvVar);
  if (path == nullptr || *path == '\0') return std::string();
  auto text = ReadFileText(path, kMaxSecretFileBytes);
  if (!text.ok()) {
    // The status names the file and why ("PATH: no such file").
    return InvalidArgument(std::string("no cluster secret: $") + kSecretFileEnvVar + " names " +
                           text.status().message() + "; mount the cluster's secret there or set $" + kSecretEnvVar);
  }
  std::string secret = std::move(*text);
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  return secret;
}

}  // namespace

std::string SecretFromEnvironment() {
  if (const char* env = std::getenv(kSecretEnvVar); env && *env) return env;
  auto from_file = SecretFromFile();
  return from_file.ok() ? *from_file : std::string();
}

Result<std::string> ResolveSecret(const std::string& configured) {
  std::string secret = configured;
  if (secret.empty()) {
    const char* env = std::getenv(kSecretEnvVar);
    if (env) secret = env;
  }
  if (secret.empty()) {
    TENAX_ASSIGN_OR_RETURN(secret, SecretFromFile());
  }
  if (secret.empty()) {
    return InvalidArgument(std::string("no cluster secret: set the ") + kSecretEnvVar +
                           " environment variable (at least 16 bytes, the same on every node), or " +
                           kSecretFileEnvVar + " to a file that holds it");
  }
  if (secret.size() < kMinSecretBytes) {
    return InvalidArgument("the cluster secret must be at least " + std::to_string(kMinSecretBytes) + " bytes");
  }
  return secret;
}

std::string RandomNonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    // No entropy means no safe handshake: a programmer/system error.
    throw std::runtime_error("RAND_bytes failed");
  }
  return nonce;
}

std::string HmacSha256(std::string_view key, std::string_view message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string ServerProof(std::string_view secret, std::string_view client_nonce, std::string_view server_nonce) {
  std::string msg = "tenax-server";
  msg.append(client_nonce).append(server_nonce);
  return HmacSha256(secret, msg);
}

std::string ClientProof(std::string_view secret, std::string_view server_nonce, std::string_view client_nonce) {
  std::string msg = "tenax-client";
  msg.append(server_nonce).append(client_nonce);
  return HmacSha256(secret, msg);
}

}  // namespace tenax::net
