// The Python extension module tenax._tenax: the version, and the creator
// of the torch.distributed backend (tenax/torch/__init__.py registers it
// under the name "tenax"). Only this file sees Python.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "elastic_member.h"
#include "tenax/core/blas_kernels.h"
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
  using tenax::python::ElasticMember;
  using tenax::python::ElasticMemberOptions;
  py::register_exception<tenax::python::MembershipChanged>(m, "MembershipChanged", PyExc_RuntimeError);
  py::class_<ElasticMember>(m, "ElasticMember",
                            "One member of an elastic job (the C++ half of tenax.torch.Manager; use that).")
      .def(py::init([](const std::string& coordinator, const std::string& job_id, int rank, const std::string& secret,
                       const std::string& host, const std::string& fingerprint, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds join_timeout, bool spare) {
             ElasticMemberOptions o;
             o.coordinator = coordinator;
             o.job_id = job_id;
             o.requested_rank = rank;
             o.secret = secret;
             o.host = host;
             o.fingerprint = fingerprint;
             o.timeout = timeout;
             o.reform_timeout = timeout;
             o.join_timeout = join_timeout;
             o.spare = spare;
             return std::make_unique<ElasticMember>(std::move(o));
           }),
           py::arg("coordinator"), py::arg("job_id"), py::arg("rank"), py::arg("secret"), py::arg("host"),
           py::arg("fingerprint"), py::arg("timeout"), py::arg("join_timeout"), py::arg("spare") = false,
           py::call_guard<py::gil_scoped_release>())
      .def("view",
           [](const ElasticMember& e) {
             auto v = e.view();
             return py::dict(py::arg("rank") = v.rank, py::arg("world") = v.world, py::arg("generation") = v.generation,
                             py::arg("member_id") = v.member_id, py::arg("joined_late") = v.joined_late,
                             py::arg("why") = v.why, py::arg("spare") = v.spare,
                             py::arg("member_ids") = v.member_ids);
           })
      .def("await_admission",
           [](ElasticMember& e, std::chrono::milliseconds slice) { return static_cast<int>(e.AwaitAdmission(slice)); },
           py::arg("slice"), py::call_guard<py::gil_scoped_release>())
      .def("config_toml", &ElasticMember::config_toml)
      .def("start_step", [](ElasticMember& e, bool failed, bool leave) { return static_cast<int>(e.StartStep(failed, leave)); },
           py::arg("failed"), py::arg("leave"), py::call_guard<py::gil_scoped_release>())
      .def("agree_state",
           [](ElasticMember& e, int64_t applied) {
             auto [top, role] = e.AgreeState(applied);
             return std::make_pair(top, static_cast<int>(role));
           },
           py::arg("applied"), py::call_guard<py::gil_scoped_release>())
      .def("offer_state",
           [](ElasticMember& e, const py::bytes& b) {
             std::string bytes = b;  // copied with the GIL held
             py::gil_scoped_release release;
             e.OfferState(bytes);
           },
           py::arg("state"))
      .def("fetch_state",
           [](ElasticMember& e) {
             std::string bytes;
             {
               py::gil_scoped_release release;
               bytes = e.FetchState();
             }
             return py::bytes(bytes);
           })
      .def("close_state", &ElasticMember::CloseState, py::call_guard<py::gil_scoped_release>())
      .def("formed", &ElasticMember::Formed, py::call_guard<py::gil_scoped_release>())
      .def("allreduce", &ElasticMember::Allreduce, py::arg("tensor"), py::arg("scale"),
           py::call_guard<py::gil_scoped_release>())
      .def("take_step_error", &ElasticMember::TakeStepError)
      .def(
          "report_progress",
          [](ElasticMember& e, int64_t step, int64_t total_steps, double loss, double test_accuracy,
             double samples_per_second, double elapsed_seconds, double step_seconds) {
            ElasticMember::Progress p;
            p.step = step;
            p.total_steps = total_steps;
            p.loss = loss;
            p.test_accuracy = test_accuracy;
            p.samples_per_second = samples_per_second;
            p.elapsed_seconds = elapsed_seconds;
            p.step_seconds = step_seconds;
            py::gil_scoped_release release;
            e.ReportProgress(p);
          },
          py::arg("step"), py::arg("total_steps"), py::arg("loss"), py::arg("test_accuracy"),
          py::arg("samples_per_second"), py::arg("elapsed_seconds"), py::arg("step_seconds"))
      .def("finish", &ElasticMember::Finish, py::arg("summary_json"), py::call_guard<py::gil_scoped_release>());
  m.def("loaded_openblas_core", &tenax::LoadedOpenBlasCore,
        "The kernels the OpenBLAS loaded in this process (torch's) runs, e.g. 'Prescott'; '' if none is loaded.");
  m.def("best_openblas_core", &tenax::BestOpenBlasCoreForCpu,
        "The best OPENBLAS_CORETYPE this CPU's flags support: 'SkylakeX', 'Haswell' or ''.");
  m.def("openblas_advice", &tenax::OpenBlasAdviceForThisProcess,
        "One line when the OpenBLAS loaded in this process (torch's) runs pre-AVX2 fallback kernels on a CPU "
        "that supports better ones, naming the OPENBLAS_CORETYPE that fixes it; '' otherwise, or when "
        "OPENBLAS_CORETYPE is set.");
  m.def(
      "backend_counters",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        auto* t = dynamic_cast<tenax::python::ProcessGroupTenax*>(pg.get());
        if (!t) throw py::type_error("not a tenax process group");
        return py::dict(py::arg("fast_allreduces") = t->fast_allreduces(),
                        py::arg("bulk_collectives") = t->bulk_collectives(),
                        py::arg("cross_memory_sums") = t->cross_memory_sums(),
                        py::arg("cross_memory") = t->cross_memory());
      },
      py::arg("group"),
      "How many float32 sum/avg allreduces took the one-sided path and how many collectives moved bulk "
      "messages, for a group created by the tenax backend; of the one-sided ones, how many read the peers' "
      "memory directly (cross_memory_sums) and whether that path is on for the group (cross_memory: '' before "
      "its first large sum, 'on', or 'off: why').");
}
