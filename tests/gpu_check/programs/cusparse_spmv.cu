// cuSPARSE: y = alpha * A x + beta * y with a random CSR matrix (generic SpMV API), fp32, against
// the CPU.
#include <cusparse.h>

#include "toolkit_check.h"

int main() {
  const int rows = 2000, columns = 1500;
  const float alpha = 2.0f, beta = 0.5f;
  std::mt19937 generator(11);
  std::uniform_int_distribution<int> perRow(0, 30), column(0, columns - 1);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<int> rowOffsets{0}, columnIndices;
  std::vector<float> values;
  for (int r = 0; r < rows; ++r) {
    std::vector<bool> used(columns, false);
    for (int e = perRow(generator); e > 0; --e) used[column(generator)] = true;
    for (int c = 0; c < columns; ++c) {
      if (used[c]) {
        columnIndices.push_back(c);
        values.push_back(value(generator));
      }
    }
    rowOffsets.push_back(int(columnIndices.size()));
  }
  const int nonzeros = int(values.size());
  const auto x = randomFloats(columns, 12), y = randomFloats(rows, 13);

  DeviceArray<int> dOffsets(rowOffsets), dColumns(columnIndices);
  DeviceArray<float> dValues(values), dX(x), dY(y);
  cusparseHandle_t handle;
  CHECK_STATUS(cusparseCreate(&handle), CUSPARSE_STATUS_SUCCESS);
  cusparseSpMatDescr_t matrix;
  cusparseDnVecDescr_t vectorX, vectorY;
  CHECK_STATUS(cusparseCreateCsr(&matrix, rows, columns, nonzeros, dOffsets.get(), dColumns.get(),
                                 dValues.get(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                 CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F),
               CUSPARSE_STATUS_SUCCESS);
  CHECK_STATUS(cusparseCreateDnVec(&vectorX, columns, dX.get(), CUDA_R_32F),
               CUSPARSE_STATUS_SUCCESS);
  CHECK_STATUS(cusparseCreateDnVec(&vectorY, rows, dY.get(), CUDA_R_32F), CUSPARSE_STATUS_SUCCESS);
  size_t bufferSize = 0;
  CHECK_STATUS(
      cusparseSpMV_bufferSize(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, matrix, vectorX,
                              &beta, vectorY, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &bufferSize),
      CUSPARSE_STATUS_SUCCESS);
  DeviceArray<unsigned char> buffer(bufferSize > 0 ? bufferSize : 1);
  CHECK_STATUS(cusparseSpMV(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, matrix, vectorX,
                            &beta, vectorY, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, buffer.get()),
               CUSPARSE_STATUS_SUCCESS);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<float> got = dY.download();

  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    double sum = 0, magnitude = 0;
    for (int e = rowOffsets[r]; e < rowOffsets[r + 1]; ++e) {
      sum += double(values[e]) * x[columnIndices[e]];
      magnitude += std::fabs(double(values[e]) * x[columnIndices[e]]);
    }
    const double want = alpha * sum + beta * y[r];
    const double error =
        std::fabs(got[r] - want) / (alpha * magnitude + std::fabs(beta * y[r]) + 1e-6);
    CHECK(error < 1e-5, "row %d: %.7g, the reference %.7g", r, double(got[r]), want);
    worst = std::max(worst, error);
  }
  std::printf("cusparseSpMV CSR %dx%d, %d nonzeros: within 1e-5 of the CPU (worst %.3g)\n", rows,
              columns, nonzeros, worst);
  cusparseDestroySpMat(matrix);
  cusparseDestroyDnVec(vectorX);
  cusparseDestroyDnVec(vectorY);
  CHECK_STATUS(cusparseDestroy(handle), CUSPARSE_STATUS_SUCCESS);
  return pass();
}
