#include "pjrt_runtime.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <sstream>

#include "pjrt/launch_queue.h"

namespace torch_tpu::pjrt {

namespace {

// Every args struct starts with struct_size; the plugin reads only what our
// header declares, so one build works with older and newer plugins.
template <typename T>
T make_args(size_t struct_size) {
  T args;
  std::memset(&args, 0, sizeof(T));
  args.struct_size = struct_size;
  return args;
}

#define PJRT_ARGS(T) make_args<T>(T##_STRUCT_SIZE)

std::string named_value_text(const PJRT_NamedValue& v) {
  switch (v.type) {
    case PJRT_NamedValue_kString:
      return std::string(v.string_value, v.value_size);
    case PJRT_NamedValue_kInt64:
      return std::to_string(v.int64_value);
    case PJRT_NamedValue_kInt64List: {
      std::string s;
      for (size_t i = 0; i < v.value_size; ++i) {
        // Appended piecewise: `"." + std::to_string(...)` trips GCC 12's false -Wrestrict.
        if (i) s += '.';
        s += std::to_string(v.int64_array_value[i]);
      }
      return s;
    }
    case PJRT_NamedValue_kFloat:
      return std::to_string(v.float_value);
    case PJRT_NamedValue_kBool:
      return v.bool_value ? "true" : "false";
  }
  return "?";
}

}  // namespace

void Plugin::check(PJRT_Error* err, const char* what) const {
  if (err == nullptr) return;
  auto margs = PJRT_ARGS(PJRT_Error_Message_Args);
  margs.error = err;
  api_->PJRT_Error_Message(&margs);
  std::string message(margs.message, margs.message_size);
  auto dargs = PJRT_ARGS(PJRT_Error_Destroy_Args);
  dargs.error = err;
  api_->PJRT_Error_Destroy(&dargs);
  throw PjrtError(std::string("PJRT ") + what + " failed: " + message);
}

bool Plugin::has_function(size_t offset_of_field) const { return api_->struct_size >= offset_of_field + sizeof(void*); }

std::shared_ptr<Plugin> Plugin::load(const std::string& path) {
  // Plugins are never dlclose'd: they register process-wide state.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    throw PjrtError("cannot load PJRT plugin '" + path + "': " + (e ? e : "dlopen failed"));
  }
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    throw PjrtError("'" + path + "' is not a PJRT plugin: it has no GetPjrtApi symbol");
  }
  auto plugin = std::shared_ptr<Plugin>(new Plugin());
  plugin->path_ = path;
  plugin->api_ = get_api();
  if (plugin->api_ == nullptr) throw PjrtError("'" + path + "': GetPjrtApi returned null");
  plugin->api_major_ = plugin->api_->pjrt_api_version.major_version;
  plugin->api_minor_ = plugin->api_->pjrt_api_version.minor_version;
  // Same major version required; within a major version, minor versions are
  // ABI-compatible by the struct_size rule.
  if (plugin->api_major_ != PJRT_API_MAJOR) {
    std::ostringstream msg;
    msg << "PJRT plugin '" << path << "' implements PJRT C API " << plugin->api_major_ << "." << plugin->api_minor_
        << ", but torch_tpu was built against " << PJRT_API_MAJOR << "." << PJRT_API_MINOR
        << "; the major versions must match";
    throw PjrtError(msg.str());
  }
  if (!plugin->has_function(offsetof(PJRT_Api, PJRT_LoadedExecutable_Execute))) {
    throw PjrtError("PJRT plugin '" + path + "' has a function table too small for torch_tpu");
  }
  auto init = PJRT_ARGS(PJRT_Plugin_Initialize_Args);
  plugin->check(plugin->api_->PJRT_Plugin_Initialize(&init), "Plugin_Initialize");
  auto attrs = PJRT_ARGS(PJRT_Plugin_Attributes_Args);
  plugin->check(plugin->api_->PJRT_Plugin_Attributes(&attrs), "Plugin_Attributes");
  for (size_t i = 0; i < attrs.num_attributes; ++i) {
    const PJRT_NamedValue& v = attrs.attributes[i];
    plugin->attributes_[std::string(v.name, v.name_size)] = named_value_text(v);
  }
  return plugin;
}

Event::~Event() {
  if (event_ == nullptr) return;
  auto args = PJRT_ARGS(PJRT_Event_Destroy_Args);
  args.event = event_;
  plugin_->api()->PJRT_Event_Destroy(&args);
}

void Event::await() {
  auto args = PJRT_ARGS(PJRT_Event_Await_Args);
  args.event = event_;
  plugin_->check(plugin_->api()->PJRT_Event_Await(&args), "Event_Await");
}

bool Event::is_ready() const {
  auto args = PJRT_ARGS(PJRT_Event_IsReady_Args);
  args.event = event_;
  plugin_->check(plugin_->api()->PJRT_Event_IsReady(&args), "Event_IsReady");
  return args.is_ready;
}

namespace {
struct ReadyCallback {
  std::shared_ptr<Plugin> plugin;
  std::function<void()> fn;
};
}  // namespace

void Event::on_ready(std::function<void()> fn) const {
  auto args = PJRT_ARGS(PJRT_Event_OnReady_Args);
  args.event = event_;
  args.user_arg = new ReadyCallback{plugin_, std::move(fn)};
  args.callback = [](PJRT_Error* error, void* user_arg) {
    std::unique_ptr<ReadyCallback> ready(static_cast<ReadyCallback*>(user_arg));
    if (error != nullptr) {  // the callback owns the event's error: its waiter reports it
      auto d = PJRT_ARGS(PJRT_Error_Destroy_Args);
      d.error = error;
      ready->plugin->api()->PJRT_Error_Destroy(&d);
    }
    ready->fn();
  };
  PJRT_Error* err = plugin_->api()->PJRT_Event_OnReady(&args);
  if (err != nullptr) {
    delete static_cast<ReadyCallback*>(args.user_arg);
    plugin_->check(err, "Event_OnReady");
  }
}

void drop_ready(std::vector<std::shared_ptr<Event>>& events) {
  events.erase(std::remove_if(events.begin(), events.end(), [](const auto& e) { return e->is_ready(); }), events.end());
}

namespace {

std::atomic<int64_t> buffers_from_host{0};

void destroy_buffer(const PJRT_Api* api, PJRT_Buffer* buffer) {
  auto args = PJRT_ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = buffer;
  api->PJRT_Buffer_Destroy(&args);
}

}  // namespace

QueuedOutputs::~QueuedOutputs() {
  for (PJRT_Buffer* b : buffers) {
    if (b) destroy_buffer(plugin->api(), b);
  }
}

void release_queued_output(QueuedOutputs& outputs, size_t index) {
  std::lock_guard<std::mutex> lock(outputs.mutex);
  if (outputs.buffers[index]) destroy_buffer(outputs.plugin->api(), outputs.buffers[index]);
  outputs.buffers[index] = nullptr;
}

Buffer::~Buffer() {
  // Released on the launch queue, behind every job queued while this
  // Buffer lived (any may read it), at no cost to this thread.
  if (queued_) {
    // Its program's job runs first (the queue's order): the output is there.
    LaunchQueue::get().push_release(std::move(queued_), index_);
  } else if (PJRT_Buffer* b = buffer_.load(std::memory_order_acquire)) {
    const PJRT_Api* api = client_->plugin()->api();
    LaunchQueue::get().push([api, b] { destroy_buffer(api, b); });  // two pointers: no allocation
  }
}

PJRT_Buffer* Buffer::take_queued() const {
  LaunchQueue::get().wait(queued_->ticket);
  std::lock_guard<std::mutex> lock(queued_->mutex);
  if (!queued_->error.empty()) throw PjrtError(queued_->error);
  PJRT_Buffer* b = queued_->buffers[index_];
  buffer_.store(b, std::memory_order_release);
  return b;
}

namespace {

// The one host-to-device call a host value makes, wherever it is made.
PJRT_Buffer* upload_host_value(Client& client, const HostValue& v) {
  return client.raw_buffer_from_host(v.bytes.data(), v.type, v.dims.data(), v.num_dims, v.device);
}

}  // namespace

PJRT_Buffer* Buffer::upload_value() const {
  PJRT_Buffer* b = upload_host_value(*client_, value_);
  PJRT_Buffer* first = nullptr;
  if (buffer_.compare_exchange_strong(first, b, std::memory_order_acq_rel)) return b;
  destroy_buffer(client_->plugin()->api(), b);  // another thread's upload won
  return first;
}

QueuedArgument Buffer::as_queued_argument() const {
  QueuedArgument argument;
  argument.buffer = buffer_.load(std::memory_order_acquire);
  if (argument.buffer) return argument;
  if (queued_) {
    argument.queued = queued_;
    argument.index = index_;
  } else if (has_value_) {
    argument.has_value = true;
    argument.value = value_;
  }
  return argument;
}

PJRT_Buffer* QueuedArgument::get() const {
  if (has_value) throw std::logic_error("internal: a host value argument is uploaded by LaunchUploads");
  if (!queued) return buffer;
  std::lock_guard<std::mutex> lock(queued->mutex);
  if (!queued->error.empty()) throw PjrtError(queued->error);
  return queued->buffers[index];
}

LaunchUploads::~LaunchUploads() {
  for (PJRT_Buffer* b : uploaded_) {
    if (b) destroy_buffer(client_.plugin()->api(), b);
  }
}

PJRT_Buffer* LaunchUploads::get(const QueuedArgument& argument) {
  if (!argument.has_value) return argument.get();
  uploaded_.push_back(nullptr);  // room first: the upload is never left unowned
  uploaded_.back() = upload_host_value(client_, argument.value);
  return uploaded_.back();
}

std::vector<int64_t> Buffer::dims() const {
  auto args = PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
  args.buffer = raw();
  client_->plugin()->check(client_->plugin()->api()->PJRT_Buffer_Dimensions(&args), "Buffer_Dimensions");
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

PJRT_Buffer_Type Buffer::element_type() const {
  auto args = PJRT_ARGS(PJRT_Buffer_ElementType_Args);
  args.buffer = raw();
  client_->plugin()->check(client_->plugin()->api()->PJRT_Buffer_ElementType(&args), "Buffer_ElementType");
  return args.type;
}

size_t Buffer::on_device_size() const {
  auto args = PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args);
  args.buffer = raw();
  client_->plugin()->check(client_->plugin()->api()->PJRT_Buffer_OnDeviceSizeInBytes(&args),
                           "Buffer_OnDeviceSizeInBytes");
  return args.on_device_size_in_bytes;
}

void Buffer::to_host(void* dst, size_t nbytes) const { start_to_host(dst, nbytes)->await(); }

std::unique_ptr<Event> Buffer::start_to_host(void* dst, size_t nbytes) const {
  const auto& plugin = client_->plugin();
  auto args = PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = raw();
  args.dst = nullptr;  // first call: ask for the size
  plugin->check(plugin->api()->PJRT_Buffer_ToHostBuffer(&args), "Buffer_ToHostBuffer(size)");
  if (args.dst_size != nbytes) {
    throw PjrtError("device buffer holds " + std::to_string(args.dst_size) + " bytes, expected " +
                    std::to_string(nbytes));
  }
  args.dst = dst;
  args.event = nullptr;
  plugin->check(plugin->api()->PJRT_Buffer_ToHostBuffer(&args), "Buffer_ToHostBuffer");
  return std::make_unique<Event>(plugin, args.event);
}

std::shared_ptr<Buffer> Buffer::copy_to_device(PJRT_Device* device) const {
  auto args = PJRT_ARGS(PJRT_Buffer_CopyToDevice_Args);
  args.buffer = raw();
  args.dst_device = device;
  client_->plugin()->check(client_->plugin()->api()->PJRT_Buffer_CopyToDevice(&args), "Buffer_CopyToDevice");
  return std::make_shared<Buffer>(client_, args.dst_buffer);
}

std::shared_ptr<Event> Buffer::ready_event() const { return ready_event_of(client_->plugin(), raw()); }

std::shared_ptr<Event> Buffer::ready_event_of(const std::shared_ptr<Plugin>& plugin, PJRT_Buffer* buffer) {
  auto args = PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buffer;
  plugin->check(plugin->api()->PJRT_Buffer_ReadyEvent(&args), "Buffer_ReadyEvent");
  return std::make_shared<Event>(plugin, args.event);
}

void Buffer::await_ready() const { ready_event()->await(); }

bool Buffer::is_ready() const { return ready_event()->is_ready(); }

LoadedExecutable::LoadedExecutable(std::shared_ptr<Client> client, PJRT_LoadedExecutable* exe)
    : client_(std::move(client)), exe_(exe) {
  const auto& plugin = client_->plugin();
  auto get = PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = exe_;
  plugin->check(plugin->api()->PJRT_LoadedExecutable_GetExecutable(&get), "LoadedExecutable_GetExecutable");
  auto n = PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  n.executable = get.executable;
  plugin->check(plugin->api()->PJRT_Executable_NumOutputs(&n), "Executable_NumOutputs");
  num_outputs_ = n.num_outputs;
  auto d = PJRT_ARGS(PJRT_Executable_Destroy_Args);
  d.executable = get.executable;
  plugin->api()->PJRT_Executable_Destroy(&d);
}

LoadedExecutable::~LoadedExecutable() {
  auto args = PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  args.executable = exe_;
  client_->plugin()->api()->PJRT_LoadedExecutable_Destroy(&args);
}

std::vector<std::shared_ptr<Buffer>> LoadedExecutable::execute(PJRT_Device* device, PJRT_Buffer* const* args,
                                                               size_t num_args, const std::vector<bool>& donatable,
                                                               int launch_id,
                                                               std::shared_ptr<Event>* completion) const {
  // The output list of a small program lives on the stack: this runs once per op.
  constexpr size_t kOnStack = 16;
  PJRT_Buffer* outputs_on_stack[kOnStack] = {};
  std::vector<PJRT_Buffer*> outputs_on_heap;
  PJRT_Buffer** out_list = outputs_on_stack;
  if (num_outputs_ > kOnStack) {
    outputs_on_heap.assign(num_outputs_, nullptr);
    out_list = outputs_on_heap.data();
  }
  execute_into(device, args, num_args, donatable, launch_id, out_list, completion);
  std::vector<std::shared_ptr<Buffer>> result;
  result.reserve(num_outputs_);
  for (size_t k = 0; k < num_outputs_; ++k) result.push_back(std::make_shared<Buffer>(client_, out_list[k]));
  return result;
}

void LoadedExecutable::execute_into(PJRT_Device* device, PJRT_Buffer* const* args, size_t num_args,
                                    const std::vector<bool>& donatable, int launch_id, PJRT_Buffer** out_list,
                                    std::shared_ptr<Event>* completion) const {
  const auto& plugin = client_->plugin();
  // The index list of a small program lives on the stack: this runs once
  // per op.
  constexpr size_t kOnStack = 16;
  int64_t non_donatable_on_stack[kOnStack];
  std::vector<int64_t> non_donatable_on_heap;
  int64_t* non_donatable = non_donatable_on_stack;
  if (num_args > kOnStack) {
    non_donatable_on_heap.resize(num_args);
    non_donatable = non_donatable_on_heap.data();
  }
  size_t num_non_donatable = 0;
  for (size_t i = 0; i < num_args; ++i) {
    if (i >= donatable.size() || !donatable[i]) non_donatable[num_non_donatable++] = static_cast<int64_t>(i);
  }
  auto options = PJRT_ARGS(PJRT_ExecuteOptions);
  options.non_donatable_input_indices = non_donatable;
  options.num_non_donatable_input_indices = num_non_donatable;
  options.launch_id = launch_id;
  PJRT_Buffer* const* arg_list = args;
  auto exec = PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  exec.executable = exe_;
  exec.options = &options;
  exec.argument_lists = &arg_list;
  exec.num_devices = 1;
  exec.num_args = num_args;
  exec.output_lists = &out_list;
  PJRT_Event* complete_event = nullptr;  // one per device launched: here one
  exec.device_complete_events = completion ? &complete_event : nullptr;
  exec.execute_device = device;
  plugin->check(plugin->api()->PJRT_LoadedExecutable_Execute(&exec), "LoadedExecutable_Execute");
  if (completion) *completion = complete_event ? std::make_shared<Event>(plugin, complete_event) : nullptr;
}

std::string LoadedExecutable::serialize() const {
  const auto& plugin = client_->plugin();
  auto get = PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = exe_;
  plugin->check(plugin->api()->PJRT_LoadedExecutable_GetExecutable(&get), "LoadedExecutable_GetExecutable");
  auto args = PJRT_ARGS(PJRT_Executable_Serialize_Args);
  args.executable = get.executable;
  PJRT_Error* err = plugin->api()->PJRT_Executable_Serialize(&args);
  std::string bytes;
  if (err == nullptr) {
    bytes.assign(args.serialized_bytes, args.serialized_bytes_size);
    if (args.serialized_executable_deleter) args.serialized_executable_deleter(args.serialized_executable);
  }
  auto d = PJRT_ARGS(PJRT_Executable_Destroy_Args);
  d.executable = get.executable;
  plugin->api()->PJRT_Executable_Destroy(&d);
  plugin->check(err, "Executable_Serialize");
  return bytes;
}

CompiledMemoryStats LoadedExecutable::memory_stats() const {
  const auto& plugin = client_->plugin();
  CompiledMemoryStats stats;
  if (plugin->api()->PJRT_Executable_GetCompiledMemoryStats == nullptr) return stats;
  auto get = PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = exe_;
  plugin->check(plugin->api()->PJRT_LoadedExecutable_GetExecutable(&get), "LoadedExecutable_GetExecutable");
  auto args = PJRT_ARGS(PJRT_Executable_GetCompiledMemoryStats_Args);
  args.executable = get.executable;
  PJRT_Error* err = plugin->api()->PJRT_Executable_GetCompiledMemoryStats(&args);
  auto d = PJRT_ARGS(PJRT_Executable_Destroy_Args);
  d.executable = get.executable;
  plugin->api()->PJRT_Executable_Destroy(&d);
  if (err != nullptr) {  // not every plugin implements it: no numbers, not an error
    auto e = PJRT_ARGS(PJRT_Error_Destroy_Args);
    e.error = err;
    plugin->api()->PJRT_Error_Destroy(&e);
    return stats;
  }
  stats.available = true;
  stats.argument = args.argument_size_in_bytes;
  stats.output = args.output_size_in_bytes;
  stats.alias = args.alias_size_in_bytes;
  stats.temp = args.temp_size_in_bytes;
  return stats;
}

std::shared_ptr<Client> Client::create(std::shared_ptr<Plugin> plugin, const Options& options) {
  auto client = std::shared_ptr<Client>(new Client());
  client->plugin_ = plugin;
  std::vector<PJRT_NamedValue> create_options;
  auto named = [&](const char* name) {
    auto v = PJRT_ARGS(PJRT_NamedValue);
    v.name = name;
    v.name_size = std::strlen(name);
    return v;
  };
  auto count = named("cpu_device_count");
  count.type = PJRT_NamedValue_kInt64;
  count.int64_value = options.cpu_device_count;
  count.value_size = 1;
  auto async = named("asynchronous");
  async.type = PJRT_NamedValue_kBool;
  async.bool_value = options.asynchronous;
  async.value_size = 1;
  bool is_cpu_plugin = plugin->path().find("cpu") != std::string::npos;
  if (is_cpu_plugin) {
    create_options.push_back(count);
    create_options.push_back(async);
  }
  auto args = PJRT_ARGS(PJRT_Client_Create_Args);
  args.create_options = create_options.data();
  args.num_options = create_options.size();
  plugin->check(plugin->api()->PJRT_Client_Create(&args), "Client_Create");
  client->client_ = args.client;

  auto name = PJRT_ARGS(PJRT_Client_PlatformName_Args);
  name.client = client->client_;
  plugin->check(plugin->api()->PJRT_Client_PlatformName(&name), "Client_PlatformName");
  client->platform_name_.assign(name.platform_name, name.platform_name_size);
  auto version = PJRT_ARGS(PJRT_Client_PlatformVersion_Args);
  version.client = client->client_;
  plugin->check(plugin->api()->PJRT_Client_PlatformVersion(&version), "Client_PlatformVersion");
  client->platform_version_.assign(version.platform_version, version.platform_version_size);
  auto devs = PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
  devs.client = client->client_;
  plugin->check(plugin->api()->PJRT_Client_AddressableDevices(&devs), "Client_AddressableDevices");
  client->devices_.assign(devs.addressable_devices, devs.addressable_devices + devs.num_addressable_devices);
  return client;
}

Client::~Client() {
  auto args = PJRT_ARGS(PJRT_Client_Destroy_Args);
  args.client = client_;
  plugin_->api()->PJRT_Client_Destroy(&args);
}

std::string Client::device_kind(size_t index) const {
  auto desc = PJRT_ARGS(PJRT_Device_GetDescription_Args);
  desc.device = devices_.at(index);
  plugin_->check(plugin_->api()->PJRT_Device_GetDescription(&desc), "Device_GetDescription");
  auto kind = PJRT_ARGS(PJRT_DeviceDescription_Kind_Args);
  kind.device_description = desc.device_description;
  plugin_->check(plugin_->api()->PJRT_DeviceDescription_Kind(&kind), "DeviceDescription_Kind");
  return std::string(kind.device_kind, kind.device_kind_size);
}

int64_t Client::device_id(size_t index) const {
  auto desc = PJRT_ARGS(PJRT_Device_GetDescription_Args);
  desc.device = devices_.at(index);
  plugin_->check(plugin_->api()->PJRT_Device_GetDescription(&desc), "Device_GetDescription");
  auto id = PJRT_ARGS(PJRT_DeviceDescription_Id_Args);
  id.device_description = desc.device_description;
  plugin_->check(plugin_->api()->PJRT_DeviceDescription_Id(&id), "DeviceDescription_Id");
  return id.id;
}

DeviceMemoryStats Client::memory_stats(size_t index) const {
  DeviceMemoryStats stats;
  auto args = PJRT_ARGS(PJRT_Device_MemoryStats_Args);
  args.device = devices_.at(index);
  PJRT_Error* err = plugin_->api()->PJRT_Device_MemoryStats(&args);
  if (err != nullptr) {  // the CPU plugin reports none: not an error for us
    auto d = PJRT_ARGS(PJRT_Error_Destroy_Args);
    d.error = err;
    plugin_->api()->PJRT_Error_Destroy(&d);
    return stats;
  }
  stats.available = true;
  stats.bytes_in_use = args.bytes_in_use;
  stats.peak_bytes_in_use = args.peak_bytes_in_use_is_set ? args.peak_bytes_in_use : 0;
  stats.bytes_limit = args.bytes_limit_is_set ? args.bytes_limit : 0;
  return stats;
}

std::shared_ptr<Buffer> Client::buffer_from_host(const void* data, PJRT_Buffer_Type type,
                                                 const std::vector<int64_t>& dims, size_t device_index) {
  return std::make_shared<Buffer>(shared_from_this(),
                                  raw_buffer_from_host(data, type, dims.data(), dims.size(), device_index));
}

PJRT_Buffer* Client::raw_buffer_from_host(const void* data, PJRT_Buffer_Type type, const int64_t* dims, size_t num_dims,
                                          size_t device_index) {
  auto args = PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client_;
  args.data = data;
  args.type = type;
  args.dims = dims;
  args.num_dims = num_dims;
  // The caller may reuse its memory as soon as we return, so the plugin copies
  // (or we wait for the transfer below).
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  args.device = devices_.at(device_index);
  plugin_->check(plugin_->api()->PJRT_Client_BufferFromHostBuffer(&args), "Client_BufferFromHostBuffer");
  if (args.done_with_host_buffer != nullptr) Event(plugin_, args.done_with_host_buffer);  // destroyed at once
  buffers_from_host.fetch_add(1, std::memory_order_relaxed);
  return args.buffer;
}

int64_t host_to_device_buffers() { return buffers_from_host.load(std::memory_order_relaxed); }

size_t byte_width(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_PRED:
    case PJRT_Buffer_Type_S8:
    case PJRT_Buffer_Type_U8:
    case PJRT_Buffer_Type_F8E5M2:
    case PJRT_Buffer_Type_F8E4M3FN:
    case PJRT_Buffer_Type_F8E4M3B11FNUZ:
    case PJRT_Buffer_Type_F8E5M2FNUZ:
    case PJRT_Buffer_Type_F8E4M3FNUZ:
    case PJRT_Buffer_Type_F8E4M3:
    case PJRT_Buffer_Type_F8E3M4:
    case PJRT_Buffer_Type_F8E8M0FNU:
      return 1;
    case PJRT_Buffer_Type_S16:
    case PJRT_Buffer_Type_U16:
    case PJRT_Buffer_Type_F16:
    case PJRT_Buffer_Type_BF16:
      return 2;
    case PJRT_Buffer_Type_S32:
    case PJRT_Buffer_Type_U32:
    case PJRT_Buffer_Type_F32:
      return 4;
    case PJRT_Buffer_Type_S64:
    case PJRT_Buffer_Type_U64:
    case PJRT_Buffer_Type_F64:
    case PJRT_Buffer_Type_C64:
      return 8;
    case PJRT_Buffer_Type_C128:
      return 16;
    default:
      return 0;
  }
}

std::shared_ptr<LoadedExecutable> Client::compile(const std::string& mlir_text, const std::string& compile_options) {
  auto program = PJRT_ARGS(PJRT_Program);
  std::string code = mlir_text;
  program.code = code.data();
  program.code_size = code.size();
  static const char kFormat[] = "mlir";
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  auto args = PJRT_ARGS(PJRT_Client_Compile_Args);
  args.client = client_;
  args.program = &program;
  args.compile_options = compile_options.data();
  args.compile_options_size = compile_options.size();
  plugin_->check(plugin_->api()->PJRT_Client_Compile(&args), "Client_Compile");
  return std::make_shared<LoadedExecutable>(shared_from_this(), args.executable);
}

std::shared_ptr<LoadedExecutable> Client::deserialize(const std::string& bytes) {
  auto args = PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  plugin_->check(plugin_->api()->PJRT_Executable_DeserializeAndLoad(&args), "Executable_DeserializeAndLoad");
  return std::make_shared<LoadedExecutable>(shared_from_this(), args.loaded_executable);
}

std::string default_compile_options() {
  // CompileOptionsProto { executable_build_options (3) { num_replicas (4): 1,
  // num_partitions (5): 1 }, compile_portable_executable (4): true }
  return std::string("\x1a\x04\x20\x01\x28\x01\x20\x01", 8);
}

namespace {
// Protobuf wire format: a field's key is (number << 3 | wire type), and
// integers are base-128 varints.
std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s.push_back(static_cast<char>(v | 0x80));
  s.push_back(static_cast<char>(v));
  return s;
}
std::string varint_field(int number, uint64_t v) { return varint(static_cast<uint64_t>(number) << 3) + varint(v); }
std::string message_field(int number, const std::string& bytes) {
  return varint((static_cast<uint64_t>(number) << 3) | 2) + varint(bytes.size()) + bytes;
}
}  // namespace

std::string replicated_compile_options(const std::vector<int64_t>& device_ids) {
  std::string packed_ids;
  for (int64_t id : device_ids) packed_ids += varint(static_cast<uint64_t>(id));
  const std::string computation_device = message_field(1, packed_ids);
  const uint64_t n = device_ids.size();
  const std::string assignment = varint_field(1, n) + varint_field(2, 1) + message_field(3, computation_device);
  const std::string build = varint_field(4, n) + varint_field(5, 1) + message_field(9, assignment);
  return message_field(3, build);
}

}  // namespace torch_tpu::pjrt
