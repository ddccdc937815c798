// Math library and intrinsics; compared against the host with tolerances.
extern "C" __global__ void mathFloat(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float* o = out + 16 * i;
  o[0] = expf(v);
  o[1] = logf(fabsf(v) + 1.0f);
  o[2] = sinf(v);
  o[3] = cosf(v);
  o[4] = tanhf(v);
  o[5] = powf(fabsf(v), 1.5f);
  o[6] = sqrtf(fabsf(v));
  o[7] = erff(v);
  o[8] = atan2f(v, 1.5f);
  o[9] = fmodf(v, 1.25f);
  o[10] = roundf(v);
  o[11] = __fdividef(v, 3.0f);
  o[12] = __expf(v);
  o[13] = __saturatef(v);
  o[14] = rsqrtf(fabsf(v) + 1.0f);
  o[15] = floorf(v) + ceilf(v) + truncf(v);
}

extern "C" __global__ void mathDouble(const double* x, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = x[i];
  double* o = out + 8 * i;
  o[0] = exp(v);
  o[1] = log(fabs(v) + 1.0);
  o[2] = sin(v);
  o[3] = cos(v);
  o[4] = sqrt(fabs(v));
  o[5] = pow(fabs(v), 0.75);
  o[6] = tanh(v);
  o[7] = v / 3.0;
}

// Large arguments take libdevice's Payne-Hanek path (carry chains, local arrays).
extern "C" __global__ void bigTrig(const float* xf, const double* xd, float* of, double* od) {
  int i = threadIdx.x;
  of[2 * i] = sinf(xf[i]);
  of[2 * i + 1] = cosf(xf[i]);
  od[2 * i] = sin(xd[i]);
  od[2 * i + 1] = cos(xd[i]);
}

extern "C" __global__ void conversions(const float* x, int* outI, unsigned* outU, float* outF) {
  int i = threadIdx.x;
  float v = x[i];
  outI[4 * i + 0] = (int)v;
  outI[4 * i + 1] = __float2int_rn(v);
  outI[4 * i + 2] = __float2int_rd(v);
  outI[4 * i + 3] = __float2int_ru(v);
  outU[i] = (unsigned)v;
  outF[2 * i] = (float)(long long)(v * 1000.0f);
  outF[2 * i + 1] = __int2float_rz(0x7fffffff - i);
}
