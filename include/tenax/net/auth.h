// The cluster secret and the HMAC challenge-response built on it. The secret
// never travels: each side proves it knows the secret by an HMAC over both
// sides' fresh nonces, so a recorded handshake cannot be replayed.
#pragma once

#include <string>
#include <string_view>

#include "tenax/core/status.h"

namespace tenax::net {

inline constexpr const char* kSecretEnvVar = "TENAX_SECRET";
// A file holding the secret (a mounted Kubernetes Secret, a Docker secret);
// the container image sets it (deploy/Dockerfile).
inline constexpr const char* kSecretFileEnvVar = "TENAX_SECRET_FILE";
inline constexpr size_t kMinSecretBytes = 16;

// The configured secret (NodeOptions::secret); when `configured` is empty,
// $TENAX_SECRET; when that is unset or empty, the contents of the file
// $TENAX_SECRET_FILE names (one trailing newline dropped).
// InvalidArgument, in one line, when none is set, when $TENAX_SECRET_FILE
// names a file that cannot be read (the line names the file), or when the
// secret is shorter than 16 bytes.
Result<std::string> ResolveSecret(const std::string& configured);

// $TENAX_SECRET, else the file $TENAX_SECRET_FILE names; "" when neither
// gives one (a missing file too: callers that can draw a random secret, such
// as `tenax run`'s launcher, do). Never fails.
std::string SecretFromEnvironment();

std::string RandomNonce();  // kNonceBytes from the OS CSPRNG
std::string HmacSha256(std::string_view key, std::string_view message);
bool ConstantTimeEqual(std::string_view a, std::string_view b);

std::string ServerProof(std::string_view secret, std::string_view client_nonce, std::string_view server_nonce);
std::string ClientProof(std::string_view secret, std::string_view server_nonce, std::string_view client_nonce);

}  // namespace tenax::net
