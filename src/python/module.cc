// The Python extension module tenax._tenax: the version, and the creator
// of the torch.distributed backend (tenax/torch/__init__.py registers it
// under the name "tenax"). Only this file sees Python.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "tenax/python/process_group_tenax.h"
#include "tenax/version.h"

namespace py = pybind11;

PYBIND11_MODULE(_tenax, m) {
  m.doc() = "tenax's C++ core for Python: see the tenax package";
  m.attr("__version__") = tenax::kTenaxVersion;  // the same as `tenax --version`
  // torch's ProcessGroup class must be registered before we return one.
  py::module_::import("torch.distributed");
  m.def("create_process_group", &tenax::python::CreateProcessGroupTenax, py::arg("store"), py::arg("rank"),
        py::arg("world_size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Rendezvous over `store` and connect `world_size` ranks: the creator torch.distributed calls for "
        "init_process_group(\"tenax\"). Returns a torch ProcessGroup.");
  m.def(
      "backend_counters",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        auto* t = dynamic_cast<tenax::python::ProcessGroupTenax*>(pg.get());
        if (!t) throw py::type_error("not a tenax process group");
        return py::dict(py::arg("fast_allreduces") = t->fast_allreduces(),
                        py::arg("bulk_collectives") = t->bulk_collectives());
      },
      py::arg("group"),
      "How many float32 sum/avg allreduces took the one-sided path and how many collectives moved bulk "
      "messages, for a group created by the tenax backend.");
}
