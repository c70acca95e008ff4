#include "triggers/webhook_signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/number_text.h"

namespace cellar {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";
constexpr size_t kMinKeyBytes = 16;

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// Standard base64 with padding into *out; false when malformed.
bool Unbase64(std::string_view text, std::string* out) {
  if (text.empty() || text.size() % 4 != 0) return false;
  out->assign(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return false;
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock counts padding as zero bytes.
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) --len;
  out->resize(len);
  return true;
}

std::string Hmac(std::string_view key, std::string_view id, int64_t timestamp,
                 std::string_view body) {
  const std::string message =
      std::string(id) + "." + std::to_string(timestamp) + "." + std::string(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

std::string Trimmed(std::string s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && space(s.back())) s.pop_back();
  size_t start = 0;
  while (start < s.size() && space(s[start])) ++start;
  return s.substr(start);
}

}  // namespace

std::string WebhookSecretSource::Describe() const {
  return env.empty() ? "file " + file : "env " + env;
}

Result<std::string> DecodeWebhookSecret(std::string_view text) {
  if (text.substr(0, kSecretPrefix.size()) == kSecretPrefix)
    text.remove_prefix(kSecretPrefix.size());
  std::string key;
  if (!Unbase64(text, &key))
    return InvalidArgument("not a webhook secret: expected whsec_ and standard base64");
  if (key.size() < kMinKeyBytes)
    return InvalidArgument("webhook secret too short: " + std::to_string(key.size()) +
                           " bytes, at least " + std::to_string(kMinKeyBytes));
  return key;
}

Result<std::vector<std::string>> LoadWebhookSecrets(
    const std::vector<WebhookSecretSource>& sources) {
  std::vector<std::string> keys;
  for (const WebhookSecretSource& s : sources) {
    std::string text;
    if (!s.env.empty()) {
      const char* v = std::getenv(s.env.c_str());
      if (v == nullptr || *v == '\0')
        return InvalidArgument("webhook secret: environment variable " + s.env + " is not set");
      text = v;
    } else {
      std::ifstream in(s.file);
      if (!in) return InvalidArgument("webhook secret: cannot read file " + s.file);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    auto key = DecodeWebhookSecret(Trimmed(std::move(text)));
    if (!key.ok()) return InvalidArgument(s.Describe() + ": " + key.status().message());
    keys.push_back(std::move(key).value());
  }
  return keys;
}

std::string SignWebhook(const std::vector<std::string>& keys, std::string_view id,
                        int64_t timestamp_seconds, std::string_view body) {
  std::string out;
  for (const std::string& key : keys) {
    if (!out.empty()) out += ' ';
    out += "v1," + Base64(Hmac(key, id, timestamp_seconds, body));
  }
  return out;
}

Status VerifyWebhook(const std::vector<std::string>& keys, std::string_view id,
                     std::string_view timestamp, std::string_view signature, std::string_view body,
                     int64_t now_seconds, int64_t tolerance_seconds) {
  if (id.empty() || timestamp.empty() || signature.empty())
    return InvalidArgument("missing webhook-id, webhook-timestamp or webhook-signature");
  std::optional<int64_t> t = ParseDecimalInteger<int64_t>(timestamp);
  if (!t) return InvalidArgument("webhook-timestamp is not Unix seconds");
  if (*t < now_seconds - tolerance_seconds) return InvalidArgument("webhook-timestamp too old");
  if (*t > now_seconds + tolerance_seconds) return InvalidArgument("webhook-timestamp too new");
  for (const std::string& key : keys) {
    const std::string expected = Hmac(key, id, *t, body);
    size_t start = 0;
    while (start < signature.size()) {
      size_t end = signature.find(' ', start);
      if (end == std::string_view::npos) end = signature.size();
      const std::string_view one = signature.substr(start, end - start);
      start = end + 1;
      if (one.substr(0, 3) != "v1,") continue;
      std::string mac;
      if (Unbase64(one.substr(3), &mac) && mac.size() == expected.size() &&
          CRYPTO_memcmp(mac.data(), expected.data(), mac.size()) == 0)
        return Status::Ok();
    }
  }
  return InvalidArgument("no webhook-signature matches");
}

}  // namespace cellar
