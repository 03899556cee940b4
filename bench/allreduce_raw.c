/* The all-reduce of 4 MiB of float32 straight through MPI, OSU-style (osu_allreduce's method:
   a barrier, the call, the median of 20 after 3 warm-up), for bench/dist.sh to set beside
   dist.all_reduce. Prints "R1 <GB/s> GB/s" on rank 0 (bytes / time). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n = 1 << 20;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  float* in = malloc(sizeof(float) * n);
  float* out = malloc(sizeof(float) * n);
  for (int i = 0; i < n; i++) in[i] = (float)(i % 97) * 0.5f;
  double t[20];
  for (int i = 0; i < 23; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (i >= 3) t[i - 3] = MPI_Wtime() - t0;
  }
  qsort(t, 20, sizeof(double), cmp);
  if (rank == 0) printf("R1 %.3f GB/s\n", 4.0 * n / t[10] * 1e-9);
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
