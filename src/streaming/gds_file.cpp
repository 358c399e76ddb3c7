#include "streaming/gds_file.h"

#include <cerrno>
#include <cstring>
#include <mutex>

#include "kbit/error.h"

#ifdef KBIT_HAVE_CUFILE
#include <cuda_runtime_api.h>
#include <cufile.h>
#include <fcntl.h>
#include <unistd.h>
#endif

namespace kbit::detail {

#ifdef KBIT_HAVE_CUFILE

namespace {

std::string describe(CUfileError_t e) {
  const char* name = "";
  switch (int(e.err)) {
    case 5007: name = " CU_FILE_PLATFORM_NOT_SUPPORTED"; break;
    case 5008: name = " CU_FILE_IO_NOT_SUPPORTED"; break;
    case 5009: name = " CU_FILE_DEVICE_NOT_SUPPORTED"; break;
    case 5010: name = " CU_FILE_NVFS_DRIVER_ERROR"; break;
    case 5018: name = " CU_FILE_INVALID_FILE_TYPE"; break;
    case 5019: name = " CU_FILE_INVALID_FILE_OPEN_FLAG"; break;
    case 5020: name = " CU_FILE_DIO_NOT_SET"; break;
    case 5027: name = " CU_FILE_HANDLE_NOT_REGISTERED (the file system or device is not usable by cuFile)"; break;
    default: break;
  }
  std::string s = concat("cuFile error ", int(e.err), name);
  if (e.err == CU_FILE_CUDA_DRIVER_ERROR) s += concat(" (CUDA driver error ", int(e.cu_err), ")");
  return s;
}

// The driver is opened once per process and stays open (cuFile closes it at exit).
const std::string& driver_status() {
  static const std::string status = [] {
    cudaFree(nullptr);  // cuFile needs the CUDA context
    const CUfileError_t st = cuFileDriverOpen();
    return st.err == CU_FILE_SUCCESS ? std::string() : "cuFileDriverOpen failed: " + describe(st);
  }();
  return status;
}

}  // namespace

bool GdsFile::probe(std::string* why) {
  const std::string& st = driver_status();
  if (!st.empty() && why) *why = st;
  return st.empty();
}

GdsFile::GdsFile(const std::string& path) : path_(path) {
  std::string why;
  KBIT_REQUIRE(probe(&why), "GPUDirect Storage: ", why);
  // O_DIRECT first (what the GDS path needs); cuFile's compatibility mode may accept only
  // a buffered descriptor on file systems without GDS support, so that is the second try.
  std::string errors;
  for (int flags : {O_RDONLY | O_DIRECT, O_RDONLY}) {
    const int fd = ::open(path.c_str(), flags);
    if (fd < 0) {
      errors += concat(errors.empty() ? "" : "; ", (flags & O_DIRECT) ? "O_DIRECT open: " : "open: ", std::strerror(errno));
      continue;
    }
    CUfileDescr_t d;
    std::memset(&d, 0, sizeof(d));
    d.handle.fd = fd;
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    CUfileHandle_t h;
    const CUfileError_t st = cuFileHandleRegister(&h, &d);
    if (st.err == CU_FILE_SUCCESS) {
      fd_ = fd;
      handle_ = h;
      return;
    }
    ::close(fd);
    errors += concat(errors.empty() ? "" : "; ", (flags & O_DIRECT) ? "with O_DIRECT: " : "buffered: ", describe(st));
  }
  throw Error(concat("GPUDirect Storage: cuFileHandleRegister(", path, "): ", errors));
}

GdsFile::~GdsFile() {
  for (int i = 0; i < n_registered_; ++i) cuFileBufDeregister(registered_[i]);
  if (handle_) cuFileHandleDeregister(static_cast<CUfileHandle_t>(handle_));
  if (fd_ >= 0) ::close(fd_);
}

void GdsFile::register_buffer(void* device, size_t bytes) {
  if (n_registered_ >= int(sizeof(registered_) / sizeof(registered_[0]))) return;
  if (cuFileBufRegister(device, bytes, 0).err == CU_FILE_SUCCESS) registered_[n_registered_++] = device;
}

void GdsFile::read(void* device_base, size_t bytes, int64_t file_offset, int64_t device_offset) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = cuFileRead(static_cast<CUfileHandle_t>(handle_), device_base, bytes - done,
                                 off_t(file_offset + int64_t(done)), off_t(device_offset + int64_t(done)));
    KBIT_REQUIRE(n > 0, "GPUDirect Storage: reading ", bytes, " bytes at offset ", file_offset, " of ", path_,
                 n == 0 ? std::string(": end of file") : concat(": error ", n));
    done += size_t(n);
  }
}

#else  // built without cuFile

bool GdsFile::probe(std::string* why) {
  if (why) *why = "this build has no cuFile (CMake did not find it; KBIT_WITH_GDS)";
  return false;
}
GdsFile::GdsFile(const std::string& path) : path_(path) {
  throw Error("GPUDirect Storage: this build has no cuFile (CMake did not find it; KBIT_WITH_GDS)");
}
GdsFile::~GdsFile() = default;
void GdsFile::register_buffer(void*, size_t) {}
void GdsFile::read(void*, size_t, int64_t, int64_t) { throw Error("GPUDirect Storage: not built"); }

#endif

}  // namespace kbit::detail
