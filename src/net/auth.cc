#include "tenax/net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <stdexcept>

#include "tenax/net/control_codec.h"

namespace tenax::net {

Result<std::string> ResolveSecret(const std::string& configured) {
  std::string secret = configured;
  if (secret.empty()) {
    const char* env = std::getenv(kSecretEnvVar);
    if (env) secret = env;
  }
  if (secret.empty()) {
    return InvalidArgument(std::string("no cluster secret: set the ") + kSecretEnvVar +
                           " environment variable (at least 16 bytes, the same on every node)");
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
