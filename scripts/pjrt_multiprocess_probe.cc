// Does the XLA:CPU plugin use the KV-store callbacks / multi-process create options?
#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "pjrt_c_api.h"
static const PJRT_Api* api;
static int kv_calls = 0;
static PJRT_Error* kv_get(PJRT_KeyValueGetCallback_Args* a) {
  kv_calls++;
  printf("  kv_get %.*s\n", (int)a->key_size, a->key);
  return nullptr;
}
static PJRT_Error* kv_put(PJRT_KeyValuePutCallback_Args* a) {
  kv_calls++;
  printf("  kv_put %.*s\n", (int)a->key_size, a->key);
  return nullptr;
}
static PJRT_Error* kv_try(PJRT_KeyValueTryGetCallback_Args* a) {
  kv_calls++;
  printf("  kv_try_get %.*s\n", (int)a->key_size, a->key);
  return nullptr;
}
static std::string msg(PJRT_Error* e) {
  if (!e) return "ok";
  PJRT_Error_Message_Args m{PJRT_Error_Message_Args_STRUCT_SIZE, nullptr, e};
  api->PJRT_Error_Message(&m);
  return std::string(m.message, m.message_size);
}
static void try_create(const char* label, std::vector<std::pair<const char*, int64_t>> opts) {
  std::vector<PJRT_NamedValue> nv;
  for (auto& [k, v] : opts) {
    PJRT_NamedValue n{};
    n.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    n.name = k;
    n.name_size = strlen(k);
    n.type = PJRT_NamedValue_kInt64;
    n.int64_value = v;
    n.value_size = 1;
    nv.push_back(n);
  }
  PJRT_Client_Create_Args a{};
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = nv.data();
  a.num_options = nv.size();
  a.kv_get_callback = kv_get;
  a.kv_put_callback = kv_put;
  a.kv_try_get_callback = kv_try;
  kv_calls = 0;
  std::string r = msg(api->PJRT_Client_Create(&a));
  printf("%s: create -> %s; kv callback calls: %d\n", label, r.c_str(), kv_calls);
  if (!a.client) return;
  PJRT_Client_ProcessIndex_Args p{PJRT_Client_ProcessIndex_Args_STRUCT_SIZE, nullptr, a.client};
  api->PJRT_Client_ProcessIndex(&p);
  PJRT_Client_Devices_Args d{PJRT_Client_Devices_Args_STRUCT_SIZE, nullptr, a.client};
  api->PJRT_Client_Devices(&d);
  PJRT_Client_AddressableDevices_Args ad{PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, nullptr, a.client};
  api->PJRT_Client_AddressableDevices(&ad);
  printf("  process_index=%d devices=%zu addressable=%zu\n", p.process_index, d.num_devices,
         ad.num_addressable_devices);
  PJRT_Client_Destroy_Args x{PJRT_Client_Destroy_Args_STRUCT_SIZE, nullptr, a.client};
  api->PJRT_Client_Destroy(&x);
}
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  auto get = (const PJRT_Api* (*)())dlsym(h, "GetPjrtApi");
  api = get();
  printf("PJRT API %d.%d\n", api->pjrt_api_version.major_version, api->pjrt_api_version.minor_version);
  PJRT_Plugin_Initialize_Args i{PJRT_Plugin_Initialize_Args_STRUCT_SIZE, nullptr};
  printf("init -> %s\n", msg(api->PJRT_Plugin_Initialize(&i)).c_str());
  try_create("no options", {});
  try_create("cpu_device_count=2", {{"cpu_device_count", 2}});
  try_create("num_nodes=2,node_id=1", {{"num_nodes", 2}, {"node_id", 1}});
  try_create("process_id=1,num_processes=2", {{"process_id", 1}, {"num_processes", 2}});
  try_create("bogus_option=7", {{"bogus_option", 7}});
}
