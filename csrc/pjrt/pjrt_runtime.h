// The PJRT C API, wrapped: plugin loading, client, devices, buffers, events,
// executables. Knows the PJRT ABI only (no torch, no StableHLO semantics).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "pjrt_c_api.h"

namespace torch_tpu::pjrt {

// Every PJRT_Error becomes one of these, carrying the plugin's message.
class PjrtError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A loaded plugin: the PJRT_Api table plus what it says about itself.
class Plugin {
 public:
  // dlopen + GetPjrtApi + version check + PJRT_Plugin_Initialize.
  // Throws PjrtError naming the path and both API versions on mismatch.
  static std::shared_ptr<Plugin> load(const std::string& path);

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int api_major() const { return api_major_; }
  int api_minor() const { return api_minor_; }
  // Plugin attributes (xla_version, stablehlo_current_version, ...), as text.
  const std::map<std::string, std::string>& attributes() const { return attributes_; }
  // Throws if `err` is non-null; always destroys it.
  void check(PJRT_Error* err, const char* what) const;
  // Whether the plugin's function table reaches `offset` (struct_size rule).
  bool has_function(size_t offset_of_field) const;

 private:
  const PJRT_Api* api_ = nullptr;
  std::string path_;
  int api_major_ = 0, api_minor_ = 0;
  std::map<std::string, std::string> attributes_;
};

class Event {
 public:
  Event(std::shared_ptr<Plugin> plugin, PJRT_Event* event) : plugin_(std::move(plugin)), event_(event) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void await();  // throws the event's error, if any
  bool is_ready() const;
  // Calls `fn` once the event is ready (at once, on this thread, if it is;
  // else on a plugin thread), whatever its status. `fn` must not throw.
  void on_ready(std::function<void()> fn) const;

 private:
  std::shared_ptr<Plugin> plugin_;
  PJRT_Event* event_;
};

// Removes the events that are ready from `events`, keeping the others in order.
void drop_ready(std::vector<std::shared_ptr<Event>>& events);

class Client;

// The results of a program whose execute is queued (launch_queue.h): the
// worker stores them here when the job runs, or the launch's error. They
// stay here until each one's Buffer is released (a Buffer caches its own
// on first use), so a later job can read them by index.
struct QueuedOutputs {
  explicit QueuedOutputs(std::shared_ptr<Plugin> p, size_t n) : plugin(std::move(p)), buffers(n, nullptr) {}
  ~QueuedOutputs();  // destroys the outputs no Buffer took
  QueuedOutputs(const QueuedOutputs&) = delete;
  QueuedOutputs& operator=(const QueuedOutputs&) = delete;
  std::shared_ptr<Plugin> plugin;
  uint64_t ticket = 0;  // the job's (LaunchQueue::push)
  std::mutex mutex;     // guards buffers (each nulled by its release) and error
  std::vector<PJRT_Buffer*> buffers;
  std::string error;  // the launch failed: every output raises this
};

// Destroys output `index` of `outputs` unless its release ran already (on
// the launch queue: LaunchQueue::push_release).
void release_queued_output(QueuedOutputs& outputs, size_t index);

// A value that one launch reads and nothing keeps (a Python number that
// changes from call to call, an RNG state): small enough to travel inside
// the launch's queued job, which uploads it right before its execute.
// Uploading it on the dispatching thread would cost that thread the
// plugin's host-to-device call, and queuing it as a job of its own a second
// job and its buffer's release.
struct HostValue {
  static constexpr size_t kMaxBytes = 16, kMaxRank = 1;
  std::array<uint8_t, kMaxBytes> bytes{};
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::array<int64_t, kMaxRank> dims{};
  size_t num_dims = 0;
  size_t device = 0;
};

// A launch argument as a queued launch's job holds it: its PJRT buffer, the
// queued output it will be, or a host value the job uploads
// (LaunchUploads). Not the Buffer itself, so a job waiting in the queue is
// not a holder that a later op's donation decision counts. It stays valid
// until the Buffer's release, which the queue runs after the job.
struct QueuedArgument {
  PJRT_Buffer* buffer = nullptr;
  std::shared_ptr<QueuedOutputs> queued;
  size_t index = 0;
  bool has_value = false;
  HostValue value;
  PJRT_Buffer* get() const;  // on the queue, once its producer ran; raises that launch's error
};

// The host values one queued launch uploads in its job; destroyed with this
// object, after the execute (PJRT keeps their memory until the program that
// reads them has finished).
class LaunchUploads {
 public:
  explicit LaunchUploads(Client& client) : client_(client) {}
  ~LaunchUploads();
  LaunchUploads(const LaunchUploads&) = delete;
  LaunchUploads& operator=(const LaunchUploads&) = delete;
  // `argument`'s PJRT buffer: uploaded here if it is a host value.
  PJRT_Buffer* get(const QueuedArgument& argument);

 private:
  Client& client_;
  std::vector<PJRT_Buffer*> uploaded_;
};

// Owns one PJRT_Buffer. Destruction releases it; PJRT keeps the memory alive
// until pending computations that read it have finished. A queued program's
// output exists once its job ran: raw() waits for that (and raises the
// launch's error, if it failed); release goes through the launch queue, so
// it follows the job and costs the dispatching thread nothing. A host value
// (HostValue) is uploaded by each queued launch that reads it, and here, once,
// if raw() is asked for it.
class Buffer {
 public:
  Buffer(std::shared_ptr<Client> client, PJRT_Buffer* buffer) : client_(std::move(client)), buffer_(buffer) {}
  Buffer(std::shared_ptr<Client> client, std::shared_ptr<QueuedOutputs> queued, size_t index)
      : client_(std::move(client)), buffer_(nullptr), queued_(std::move(queued)), index_(index) {}
  Buffer(std::shared_ptr<Client> client, const HostValue& value)
      : client_(std::move(client)), buffer_(nullptr), has_value_(true), value_(value) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  PJRT_Buffer* raw() const {
    PJRT_Buffer* b = buffer_.load(std::memory_order_acquire);
    if (b) return b;
    if (queued_) return take_queued();
    return has_value_ ? upload_value() : nullptr;
  }
  QueuedArgument as_queued_argument() const;
  // A host value kept for many launches (a captured program's constant):
  // uploaded now, once, so those launches take the buffer instead of each
  // uploading it. Nothing for any other buffer.
  void upload_value_now() const {
    if (has_value_ && !buffer_.load(std::memory_order_acquire)) upload_value();
  }
  const std::shared_ptr<Client>& client() const { return client_; }
  std::vector<int64_t> dims() const;
  PJRT_Buffer_Type element_type() const;
  size_t on_device_size() const;
  // Device to host: blocks until the bytes are in `dst` (size must match).
  void to_host(void* dst, size_t nbytes) const;
  // The same without blocking: the bytes are in `dst` once the returned event
  // is ready, and `dst` must live until then. Several copies started before
  // one wait cost the host one round trip instead of one each.
  std::unique_ptr<Event> start_to_host(void* dst, size_t nbytes) const;
  // Device to device (another device of the same client).
  std::shared_ptr<Buffer> copy_to_device(PJRT_Device* device) const;
  void await_ready() const;
  bool is_ready() const;
  // The event of this buffer becoming ready. It outlives the buffer: it can
  // be awaited after the buffer was donated to a later program.
  std::shared_ptr<Event> ready_event() const;
  static std::shared_ptr<Event> ready_event_of(const std::shared_ptr<Plugin>& plugin, PJRT_Buffer* buffer);

 private:
  PJRT_Buffer* take_queued() const;
  PJRT_Buffer* upload_value() const;
  std::shared_ptr<Client> client_;
  mutable std::atomic<PJRT_Buffer*> buffer_;
  std::shared_ptr<QueuedOutputs> queued_;
  size_t index_ = 0;
  bool has_value_ = false;
  HostValue value_;
};

// What XLA's buffer assignment gives a compiled program
// (PJRT_Executable_GetCompiledMemoryStats), in bytes: `alias` of the
// arguments are reused for outputs, `temp` is scratch the program allocates.
struct CompiledMemoryStats {
  bool available = false;  // the plugin reports them
  int64_t argument = 0, output = 0, alias = 0, temp = 0;
};

class LoadedExecutable : public std::enable_shared_from_this<LoadedExecutable> {
 public:
  LoadedExecutable(std::shared_ptr<Client> client, PJRT_LoadedExecutable* exe);
  ~LoadedExecutable();
  LoadedExecutable(const LoadedExecutable&) = delete;
  LoadedExecutable& operator=(const LoadedExecutable&) = delete;

  size_t num_outputs() const { return num_outputs_; }
  // Runs on `device` without waiting for completion. Arguments listed in
  // `donated` may be consumed (their Buffer objects must not be used again).
  // A replicated executable (replicated_compile_options) runs only the
  // replica assigned to `device`: every participating device must be
  // launched, each with the same `launch_id`, which the plugin's collectives
  // use to pair the launches (PJRT_ExecuteOptions.launch_id). On the XLA:CPU
  // plugin such a launch blocks in its first collective until every replica
  // reached it, so each replica is launched from its own thread.
  std::vector<std::shared_ptr<Buffer>> execute(PJRT_Device* device, const std::vector<PJRT_Buffer*>& args,
                                               const std::vector<bool>& donatable, int launch_id = 0) const {
    return execute(device, args.data(), args.size(), donatable, launch_id);
  }
  // The same over `num_args` arguments at `args`: a launch per op passes an
  // array on its stack, not a vector made per call. With `completion`, the
  // plugin's event of this execution finishing is stored there (null if the
  // plugin gives none): it asks the plugin once, in the launch itself, where
  // an output's ready event is a second call that holds the output.
  std::vector<std::shared_ptr<Buffer>> execute(PJRT_Device* device, PJRT_Buffer* const* args, size_t num_args,
                                               const std::vector<bool>& donatable, int launch_id,
                                               std::shared_ptr<Event>* completion = nullptr) const;
  // The same, leaving the num_outputs() results' ownership to the caller
  // in `outputs` (a queued launch's job hands them to its QueuedOutputs).
  void execute_into(PJRT_Device* device, PJRT_Buffer* const* args, size_t num_args, const std::vector<bool>& donatable,
                    int launch_id, PJRT_Buffer** outputs, std::shared_ptr<Event>* completion) const;
  std::string serialize() const;
  CompiledMemoryStats memory_stats() const;
  PJRT_LoadedExecutable* raw() const { return exe_; }

 private:
  std::shared_ptr<Client> client_;
  PJRT_LoadedExecutable* exe_;
  size_t num_outputs_ = 0;
};

struct DeviceMemoryStats {
  bool available = false;
  int64_t bytes_in_use = 0, peak_bytes_in_use = 0, bytes_limit = 0;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  struct Options {
    int cpu_device_count = 1;  // only the XLA:CPU plugin reads it
    bool asynchronous = true;
  };
  static std::shared_ptr<Client> create(std::shared_ptr<Plugin> plugin, const Options& options);
  ~Client();

  const std::shared_ptr<Plugin>& plugin() const { return plugin_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  const std::vector<PJRT_Device*>& devices() const { return devices_; }
  std::string device_kind(size_t index) const;
  // The device's global id (PJRT_DeviceDescription_Id): what device
  // assignments and collectives' global device ids name.
  int64_t device_id(size_t index) const;
  DeviceMemoryStats memory_stats(size_t index) const;

  // Host to device. The host bytes may be reused once this returns.
  std::shared_ptr<Buffer> buffer_from_host(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims,
                                           size_t device_index);
  // The same, leaving the new PJRT buffer's ownership to the caller (a
  // queued upload's job hands it to its QueuedOutputs).
  PJRT_Buffer* raw_buffer_from_host(const void* data, PJRT_Buffer_Type type, const int64_t* dims, size_t num_dims,
                                    size_t device_index);
  // Compiles MLIR (StableHLO) text with the given serialized CompileOptionsProto.
  std::shared_ptr<LoadedExecutable> compile(const std::string& mlir_text, const std::string& compile_options);
  std::shared_ptr<LoadedExecutable> deserialize(const std::string& bytes);
  PJRT_Client* raw() const { return client_; }

 private:
  Client() = default;
  std::shared_ptr<Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::string platform_name_, platform_version_;
  std::vector<PJRT_Device*> devices_;
};

// Host-to-device buffers made in this process (Client::raw_buffer_from_host):
// torch_tpu.metrics()'s "uploads".
int64_t host_to_device_buffers();

// Bytes per element of `type`; 0 where an element is not whole bytes (S4,
// F4E2M1FN, ...) or the type has no size (TOKEN, INVALID).
size_t byte_width(PJRT_Buffer_Type type);

// Minimal CompileOptionsProto, hand-encoded (protobuf wire format):
// executable_build_options (field 3) { num_replicas (4): 1, num_partitions (5): 1 },
// compile_portable_executable (4): true so one executable runs on any device.
std::string default_compile_options();

// CompileOptionsProto for a program replicated over `device_ids` (PJRT
// device ids, in replica order): executable_build_options { num_replicas:
// n, num_partitions: 1, device_assignment (9) { replica_count: n,
// computation_count: 1, computation_devices { replica_device_ids } } }.
// Replica k runs on device_ids[k]; collectives' replica groups name
// replicas. Not portable: the assignment is part of the executable.
std::string replicated_compile_options(const std::vector<int64_t>& device_ids);

}  // namespace torch_tpu::pjrt
