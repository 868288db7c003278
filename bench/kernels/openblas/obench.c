// obench: the OpenBLAS peer of bench/kernels. It times cblas_sgemm on the
// same products as our Linear: C[M×N] = A[M×K] · Wᵀ with W an nn.Linear
// weight [N×K] (RowMajor, NoTrans, Trans, beta = 0), and prints one line per
// shape in the format the Go report reads:
//
//	openblas <threads> f32 <M>x<K>x<N> <median seconds> <reps>
//
// Usage: OPENBLAS_NUM_THREADS=t OPENBLAS_CORETYPE=<core> ./obench
//        [-t threads] [-mintime s] [-cold MB] [-cpuclock 1] MxKxN...
// With -cold, shapes with M <= 16 cycle through copies of W totalling at
// least that many MB, so W comes from DRAM as in decoding a real model.
// With -cpuclock 1 (single thread only) calls are timed by the thread's CPU
// time, which leaves out time the host gave to other processes.
// Build: gcc -O2 -o obench obench.c -I/usr/include/x86_64-linux-gnu -lopenblas
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static clockid_t clk = CLOCK_MONOTONIC;

static double now(void) {
	struct timespec ts;
	clock_gettime(clk, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static float *randbuf(size_t n, unsigned *seed) {
	float *p = malloc(n * sizeof(float));
	if (!p) {
		fprintf(stderr, "obench: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 1664525u + 1013904223u;
		p[i] = (float)((*seed >> 8) * (2.0 / 16777216.0) - 1.0);
	}
	return p;
}

int main(int argc, char **argv) {
	int threads = 1;
	double mintime = 0.5, coldMB = 0;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i += 2) {
		if (i + 1 >= argc) break;
		if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-mintime")) mintime = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-cold")) coldMB = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-cpuclock") && atoi(argv[i + 1])) clk = CLOCK_THREAD_CPUTIME_ID;
	}
	unsigned seed = 12345;
	for (; i < argc; i++) {
		int M, K, N;
		if (sscanf(argv[i], "%dx%dx%d", &M, &K, &N) != 3) {
			fprintf(stderr, "obench: bad shape %s\n", argv[i]);
			return 2;
		}
		size_t wn = (size_t)N * K;
		int copies = 1;
		if (coldMB > 0 && M <= 16) {
			copies = (int)(coldMB * 1e6 / (wn * 4.0)) + 1;
		}
		float **W = malloc(copies * sizeof(float *));
		for (int c = 0; c < copies; c++) W[c] = randbuf(wn, &seed);
		float *A = randbuf((size_t)M * K, &seed);
		float *C = calloc((size_t)M * N, sizeof(float));
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W[0], K, 0.0f, C, N);
		int cap = 1 << 16, reps = 0, c = 0;
		double *t = malloc(cap * sizeof(double));
		struct timespec w0, w1;
		clock_gettime(CLOCK_MONOTONIC, &w0);
		for (;;) {
			clock_gettime(CLOCK_MONOTONIC, &w1);
			double el = (w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) * 1e-9;
			if ((el >= mintime && reps >= 5) || reps >= cap) break;
			c = (c + 1) % copies;
			double t0 = now();
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W[c], K, 0.0f, C, N);
			t[reps++] = now() - t0;
		}
		qsort(t, reps, sizeof(double), cmp);
		printf("openblas %d f32 %dx%dx%d %.9f %d\n", threads, M, K, N, t[reps / 2], reps);
		fflush(stdout);
		for (int c = 0; c < copies; c++) free(W[c]);
		free(W);
		free(A);
		free(C);
		free(t);
	}
	return 0;
}
