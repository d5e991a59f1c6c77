// One `mul_mat` timed in llama.cpp's ggml, for side-by-side runs with our
// `cargo bench --bench quants -- mul_mat/batch8` (docs/benchmarking.md).
//   gcc -O2 -march=native benches/ggml-mul-mat.c -I$LLAMA/ggml/include \
//       $BUILD/ggml/src/libggml.a $BUILD/ggml/src/libggml-cpu.a \
//       $BUILD/ggml/src/libggml-base.a -lstdc++ -lm -fopenmp -lpthread -o ggml-mul-mat
//   ./ggml-mul-mat TYPE K M N ITERS [THREADS]   (TYPE: ggml's number, 8 = Q8_0, 6 = Q5_0)
// Weights `0.1 + cos(i + 3)` quantized, activations `0.1 + cos(i + 4)`, as our bench;
// prints the best of 5 rounds of ITERS computations.
#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int typ=atoi(argv[1]); int k=atoi(argv[2]); int m=atoi(argv[3]); int n=atoi(argv[4]); int iters=atoi(argv[5]); int nth=argc>6?atoi(argv[6]):1;
  struct ggml_init_params p={ (size_t)1<<31, NULL, false};
  struct ggml_context*ctx=ggml_init(p);
  struct ggml_tensor*w=ggml_new_tensor_2d(ctx,typ,k,m);
  float*tmp=malloc(sizeof(float)*k*m); for(long i=0;i<(long)k*m;i++) tmp[i]=0.1f+cosf(i+3);
  ggml_quantize_chunk(typ,tmp,w->data,0,m,k,NULL);
  struct ggml_tensor*x=ggml_new_tensor_2d(ctx,GGML_TYPE_F32,k,n);
  for(long i=0;i<(long)k*n;i++) ((float*)x->data)[i]=0.1f+cosf(i+4);
  struct ggml_tensor*y=ggml_mul_mat(ctx,w,x);
  struct ggml_cgraph*g=ggml_new_graph(ctx); ggml_build_forward_expand(g,y);
  ggml_graph_compute_with_ctx(ctx,g,nth);
  double best=1e9;
  for(int r=0;r<5;r++){double t0=now(); for(int i=0;i<iters;i++) ggml_graph_compute_with_ctx(ctx,g,nth); double t=(now()-t0)/iters; if(t<best)best=t;}
  printf("ggml type %d %dx%d n=%d: %.1f us\n",typ,k,m,n,best*1e6);
}
