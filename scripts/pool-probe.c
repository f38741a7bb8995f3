/*
 * pool-probe.c - runs scripted scenarios on fresh cudaMallocAsync pools and prints where each
 * allocation went: how traces/h200-pool-probes.txt was made (doc/real-gpu.md). Not part of the
 * build (allocsim itself replays the same scenarios: tests/cuda.sh). Build and run on a CUDA machine:
 *   gcc -O2 -I/usr/local/cuda/include scripts/pool-probe.c -o pool-probe -L/usr/local/cuda/lib64 -lcudart
 *   grep -v '^#' traces/h200-pool-probes.txt | tail -n +2 | ./pool-probe
 * Input lines: NAME|OPS[|anything]; OPS: x=SIZE allocates (K/M suffixes, decimals allowed), -x frees,
 * sync = cudaStreamSynchronize, trim = sync + cudaMemPoolTrimTo(0), R prints the reserved bytes,
 * wN spins N microseconds on the host (no CUDA call), q = cudaStreamQuery, r and u read the pool's
 * ReservedMemCurrent and UsedMemCurrent attributes (printing nothing).
 * Output: NAME: x@OFFSET_MIB ... | R=RESERVED_MIB (offsets from the scenario's first allocation).
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
static double now_us(void){ struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1e6+t.tv_nsec/1e3; }
#define MAXV 4096
int main(void){
  static char line[1 << 16];
  cudaSetDevice(0); cudaFree(0);
  while(fgets(line,sizeof line,stdin)){
    if(line[0]=='#'||line[0]=='\n') continue;
    char *colon=strchr(line,'|'); if(!colon) continue; *colon=0;
    char *end=strchr(colon+1,'|'); if(end) *end=0;
    printf("%s:",line);
    cudaMemPool_t pool; struct cudaMemPoolProps props; memset(&props,0,sizeof props);
    props.allocType=cudaMemAllocationTypePinned; props.location.type=cudaMemLocationTypeDevice; props.location.id=0;
    if(cudaMemPoolCreate(&pool,&props)!=cudaSuccess){printf(" poolcreate failed\n");continue;}
    uint64_t thr=UINT64_MAX; cudaMemPoolSetAttribute(pool,cudaMemPoolAttrReleaseThreshold,&thr);
    int on=1; cudaMemPoolSetAttribute(pool,cudaMemPoolReuseFollowEventDependencies,&on);
    cudaMemPoolSetAttribute(pool,cudaMemPoolReuseAllowOpportunistic,&on);
    cudaMemPoolSetAttribute(pool,cudaMemPoolReuseAllowInternalDependencies,&on);
    char names[MAXV][16]; void *ptr[MAXV]; int nv=0; uintptr_t base=0;
    for(char *t=strtok(colon+1," \t\n");t;t=strtok(NULL," \t\n")){
      if(!strcmp(t,"sync")){cudaStreamSynchronize(0);continue;}
      if(!strcmp(t,"q")){cudaStreamQuery(0);continue;}
      if(!strcmp(t,"r")||!strcmp(t,"u")){unsigned long long v=0;cudaMemPoolGetAttribute(pool,t[0]=='r'?cudaMemPoolAttrReservedMemCurrent:cudaMemPoolAttrUsedMemCurrent,&v);continue;}
      if(t[0]=='w'&&t[1]>='0'&&t[1]<='9'){double e=now_us()+atof(t+1); while(now_us()<e); continue;}
      if(!strcmp(t,"trim")){cudaStreamSynchronize(0);cudaMemPoolTrimTo(pool,0);continue;}
      if(!strcmp(t,"R")){unsigned long long v=0;cudaMemPoolGetAttribute(pool,cudaMemPoolAttrReservedMemCurrent,&v);printf(" R=%.0fM",v/1048576.0);continue;}
      if(t[0]=='-'){int i; for(i=0;i<nv;i++) if(!strcmp(names[i],t+1)) break; if(i<nv&&ptr[i]){cudaFreeAsync(ptr[i],0);ptr[i]=NULL;} else printf(" ?%s",t); continue;}
      char *eq=strchr(t,'='); if(!eq){printf(" bad:%s",t);continue;} *eq=0;
      double v=atof(eq+1); char suf=eq[strlen(eq+1)]; if(suf=='M') v*=1048576; else if(suf=='K') v*=1024;
      void *p=NULL; cudaError_t e=cudaMallocFromPoolAsync(&p,(size_t)v,pool,0);
      if(e!=cudaSuccess){printf(" %s=ERR",t);cudaGetLastError();continue;}
      if(!base) base=(uintptr_t)p;
      int i; for(i=0;i<nv;i++) if(!strcmp(names[i],t)) break; if(i==nv){ if(nv<MAXV) nv++; strncpy(names[i],t,15); names[i][15]=0; }
      ptr[i]=p;
      printf(" %s@%.4g",t,((intptr_t)((uintptr_t)p-base))/1048576.0);
    }
    { unsigned long long v=0; cudaMemPoolGetAttribute(pool,cudaMemPoolAttrReservedMemCurrent,&v); printf(" | R=%.0fM",v/1048576.0); }
    for(int i=0;i<nv;i++) if(ptr[i]) cudaFreeAsync(ptr[i],0);
    cudaStreamSynchronize(0); cudaMemPoolDestroy(pool);
    printf("\n"); fflush(stdout);
  }
  return 0;
}
