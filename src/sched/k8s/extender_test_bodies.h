// Request bodies as kube-scheduler sends them to an extender (full v1.Pod
// and v1.Node objects, as encoding/json writes ExtenderArgs), and the
// cluster state of the extender tests. Shared by src/sched/k8s/extender_test.cc
// and tests/sched_extender_cli_test.cc.
//
// The cluster: zone-a holds a-1, a-2, a-3; zone-b holds b-1, b-2. Job
// "resnet" has one pod on a-1; the links measured from a-1 are good to a-2,
// fair to a-3 and b-1, unreachable to b-2.
#pragma once

#include <string>
#include <vector>

namespace tenax::sched::testing {

inline std::string Replace(std::string text, const std::string& key, const std::string& value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) {
    text.replace(at, key.size(), value);
  }
  return text;
}

// A v1.Node as the API server stores it; zone "" = no zone label.
inline std::string NodeJson(const std::string& name, const std::string& zone) {
  const std::string zone_label = zone.empty() ? ""
                                              : R"("topology.kubernetes.io/zone": ")" + zone +
                                                    R"(", "topology.kubernetes.io/region": "eu-west1",)";
  return Replace(Replace(R"json({
  "metadata": {
    "name": "@NAME@",
    "uid": "6c1b4a0e-3f0f-4d1e-9d7a-@NAME@",
    "resourceVersion": "48211",
    "creationTimestamp": "2024-05-02T09:14:07Z",
    "labels": {
      "beta.kubernetes.io/arch": "amd64",
      "beta.kubernetes.io/os": "linux",
      "kubernetes.io/arch": "amd64",
      "kubernetes.io/hostname": "@NAME@",
      "kubernetes.io/os": "linux",
      @ZONE@
      "node.kubernetes.io/instance-type": "n2-standard-8"
    },
    "annotations": {
      "node.alpha.kubernetes.io/ttl": "0",
      "volumes.kubernetes.io/controller-managed-attach-detach": "true"
    }
  },
  "spec": {
    "podCIDR": "10.244.1.0/24",
    "podCIDRs": ["10.244.1.0/24"],
    "providerID": "gce://tenax-test/eu-west1/@NAME@"
  },
  "status": {
    "capacity": {"cpu": "8", "ephemeral-storage": "101430960Ki", "hugepages-2Mi": "0", "memory": "32874596Ki", "pods": "110"},
    "allocatable": {"cpu": "7910m", "ephemeral-storage": "93478772582", "hugepages-2Mi": "0", "memory": "29700196Ki", "pods": "110"},
    "conditions": [
      {"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-05-02T10:01:12Z",
       "lastTransitionTime": "2024-05-02T09:14:37Z", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    ],
    "addresses": [{"type": "InternalIP", "address": "10.132.0.7"}, {"type": "Hostname", "address": "@NAME@"}],
    "nodeInfo": {"kubeletVersion": "v1.29.4", "containerRuntimeVersion": "containerd://1.7.13",
                 "kernelVersion": "6.1.0-21-cloud-amd64", "osImage": "Debian GNU/Linux 12 (bookworm)",
                 "operatingSystem": "linux", "architecture": "amd64"}
  }
})json",
                         "@ZONE@", zone_label),
                 "@NAME@", name);
}

// A pending v1.Pod of a tenax job; job "" = no tenax labels at all; an
// empty constraint or storage list leaves that annotation out.
inline std::string PodJson(const std::string& name, const std::string& job, const std::string& zone_constraint = "",
                           const std::string& storage_nodes = "") {
  std::string labels = R"("app.kubernetes.io/name": "trainer")";
  if (!job.empty()) labels += R"(, "tenax.dev/job": ")" + job + R"(", "tenax.dev/role": "worker")";
  std::string annotations = R"("kubectl.kubernetes.io/default-container": "worker")";
  if (!zone_constraint.empty()) annotations += R"(, "tenax.dev/zone-constraint": ")" + zone_constraint + "\"";
  if (!storage_nodes.empty()) annotations += R"(, "tenax.dev/storage-nodes": ")" + storage_nodes + "\"";
  return Replace(Replace(Replace(R"json({
  "metadata": {
    "name": "@NAME@",
    "namespace": "ml",
    "uid": "0f6e3c2a-1b2d-4e5f-8a9b-@NAME@",
    "resourceVersion": "48302",
    "creationTimestamp": "2024-05-02T10:02:41Z",
    "labels": {@LABELS@},
    "annotations": {@ANNOTATIONS@},
    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "resnet", "uid": "3d1f", "controller": true, "blockOwnerDeletion": true}]
  },
  "spec": {
    "volumes": [{"name": "kube-api-access-7xk2p", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}}],
    "containers": [{
      "name": "worker",
      "image": "registry.example.com/tenax:0.1.0",
      "command": ["tenax", "worker", "--job", "/etc/tenax/job.toml"],
      "ports": [{"name": "tenax", "containerPort": 7000, "protocol": "TCP"}],
      "env": [{"name": "TENAX_SECRET", "valueFrom": {"secretKeyRef": {"name": "tenax-secret", "key": "secret"}}}],
      "resources": {"limits": {"cpu": "4", "memory": "8Gi"}, "requests": {"cpu": "4", "memory": "8Gi"}},
      "volumeMounts": [{"name": "kube-api-access-7xk2p", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
      "terminationMessagePath": "/dev/termination-log",
      "terminationMessagePolicy": "File",
      "imagePullPolicy": "IfNotPresent"
    }],
    "restartPolicy": "Never",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "serviceAccountName": "default",
    "serviceAccount": "default",
    "securityContext": {},
    "schedulerName": "default-scheduler",
    "tolerations": [
      {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
      {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ],
    "priority": 0,
    "enableServiceLinks": true,
    "preemptionPolicy": "PreemptLowerPriority"
  },
  "status": {"phase": "Pending", "qosClass": "Guaranteed"}
})json",
                                 "@LABELS@", labels),
                         "@ANNOTATIONS@", annotations),
                 "@NAME@", name);
}

struct TestNode {
  std::string name, zone;
};

inline std::vector<TestNode> ClusterNodes() {
  return {{"a-1", "zone-a"}, {"a-2", "zone-a"}, {"a-3", "zone-a"}, {"b-1", "zone-b"}, {"b-2", "zone-b"}};
}

// ExtenderArgs as a kube-scheduler without nodeCacheCapable sends it.
inline std::string ArgsWithNodes(const std::string& pod, const std::vector<TestNode>& nodes) {
  std::string items;
  for (const TestNode& n : nodes) items += (items.empty() ? "" : ",") + NodeJson(n.name, n.zone);
  return R"({"Pod":)" + pod + R"(,"Nodes":{"metadata":{},"items":[)" + items + R"(]},"NodeNames":null})";
}

// ExtenderArgs as a kube-scheduler with nodeCacheCapable: true sends it.
inline std::string ArgsWithNames(const std::string& pod, const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "\"" : ",\"") + n + "\"";
  return R"({"Pod":)" + pod + R"(,"Nodes":null,"NodeNames":[)" + list + "]}";
}

// The state file of the scenario above (`links` as LinkMatrix::ToJson).
inline std::string ClusterStateJson() {
  return R"({
 "half_life_seconds": 60,
 "links": [
  {"a": "a-1", "b": "a-2", "rtt_ms": 0.1, "loss": 0, "throughput_gbps": 9.5, "reachable": true},
  {"a": "a-1", "b": "a-3", "rtt_ms": 0.3, "loss": 0.001, "throughput_gbps": 4, "reachable": true},
  {"a": "a-1", "b": "b-1", "rtt_ms": 1.2, "loss": 0, "throughput_gbps": 4.5, "reachable": true},
  {"a": "a-1", "b": "b-2", "rtt_ms": 0, "loss": 1, "throughput_gbps": 0, "reachable": false},
  {"a": "b-1", "b": "b-2", "rtt_ms": 0.15, "loss": 0, "throughput_gbps": 9, "reachable": true}
 ],
 "jobs": {"resnet": ["a-1"]},
 "zones": {"a-1": "zone-a", "a-2": "zone-a", "a-3": "zone-a", "b-1": "zone-b", "b-2": "zone-b"}
})";
}

}  // namespace tenax::sched::testing
