#include "testing/test_certificates.h"

#include <chrono>
#include <fstream>
#include <vector>

#include "testing/child_process.h"

namespace cellar::testing {
namespace {

Status OpenSsl(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const RunResult r = RunToExit(argv, dir.File("openssl.log"), std::chrono::seconds(30));
  if (r.exit_code != 0)
    return Internal("openssl " + args[0] + " failed (exit " + std::to_string(r.exit_code) + "):\n" +
                    r.log);
  return Status::Ok();
}

std::vector<std::string> NewEcKey(const TempDir& dir, const std::string& name) {
  return {"-newkey",
          "ec",
          "-pkeyopt",
          "ec_paramgen_curve:prime256v1",
          "-nodes",
          "-keyout",
          dir.File(name + "-key.pem"),
          "-subj",
          "/CN=" + name};
}

}  // namespace

Status MakeTestCa(const TempDir& dir, const std::string& name) {
  std::vector<std::string> args = {"req", "-x509"};
  for (const std::string& a : NewEcKey(dir, name)) args.push_back(a);
  for (const std::string& a :
       {std::string("-out"), dir.File(name + ".pem"), std::string("-days"), std::string("2")})
    args.push_back(a);
  return OpenSsl(dir, args);
}

Status MakeTestCertificate(const TempDir& dir, const std::string& name, const std::string& ca,
                           const std::string& san) {
  std::vector<std::string> req = {"req"};
  for (const std::string& a : NewEcKey(dir, name)) req.push_back(a);
  req.push_back("-out");
  req.push_back(dir.File(name + ".csr"));
  {
    std::ofstream ext(dir.File(name + ".ext"));
    ext << "subjectAltName=" << san << "\n";
  }
  CELLAR_RETURN_IF_ERROR(OpenSsl(dir, req));
  return OpenSsl(dir, {"x509", "-req", "-in", dir.File(name + ".csr"), "-CA", dir.File(ca + ".pem"),
                       "-CAkey", dir.File(ca + "-key.pem"), "-CAcreateserial", "-days", "2", "-out",
                       dir.File(name + ".pem"), "-extfile", dir.File(name + ".ext")});
}

}  // namespace cellar::testing
