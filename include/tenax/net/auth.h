// The cluster secret and the HMAC challenge-response built on it. The secret
// never travels: each side proves it knows the secret by an HMAC over both
// sides' fresh nonces, so a recorded handshake cannot be replayed.
#pragma once

#include <string>
#include <string_view>

#include "tenax/core/status.h"

namespace tenax::net {

inline constexpr const char* kSecretEnvVar = "TENAX_SECRET";
inline constexpr size_t kMinSecretBytes = 16;

// The configured secret (NodeOptions::secret), or $TENAX_SECRET when
// `configured` is empty.
// InvalidArgument when neither is set or the secret is shorter than 16 bytes.
Result<std::string> ResolveSecret(const std::string& configured);

std::string RandomNonce();  // kNonceBytes from the OS CSPRNG
std::string HmacSha256(std::string_view key, std::string_view message);
bool ConstantTimeEqual(std::string_view a, std::string_view b);

std::string ServerProof(std::string_view secret, std::string_view client_nonce, std::string_view server_nonce);
std::string ClientProof(std::string_view secret, std::string_view server_nonce, std::string_view client_nonce);

}  // namespace tenax::net
