// Uses only the installed public headers: checkpoint a vector, restart it, check it.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/config.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int ok = 0;
  {
    ckpt::Options o = ckpt::Options::defaults();
    o.dir = argc > 1 ? argv[1] : "consumer-ckpt";
    ckpt::Runtime rt(MPI_COMM_WORLD, o);
    std::vector<double> v(1000, 1.5);
    rt.protect("v", v.data(), ckpt::DType::f64, {v.size()});
    ckpt::Status s = rt.checkpoint(1).wait();
    v.assign(v.size(), 0.0);
    if (s.ok()) s = rt.restart(1);
    ok = s.ok() && v[999] == 1.5;
    std::printf("consumer (ckpt %s): %s\n", CKPT_VERSION, ok ? "ok" : s.to_string().c_str());
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
