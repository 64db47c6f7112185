"""A sequence model: OUTPUT is the running sum of INPUT over the sequence so far (int32,
wrapping), kept per correlation id from the START request to the END one. Requests the
sequence batcher sends with READY = 0 (empty slots) get zeros."""
import numpy as np
import triton_python_backend_utils as pb_utils


def control(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().ravel()[0])


def wrap_int32(value):
    return (value + 2**31) % 2**32 - 2**31


class TritonPythonModel:
    def initialize(self, args):
        self.totals = {}

    def execute(self, requests):
        answers = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            if control(request, "READY") == 0:
                out = np.zeros(value.shape, dtype=np.int32)
            else:
                key = request.correlation_id()
                base = 0 if control(request, "START") else self.totals.get(key, 0)
                total = wrap_int32(base + int(value.astype(np.int64).sum()))
                if control(request, "END"):
                    self.totals.pop(key, None)
                else:
                    self.totals[key] = total
                out = np.full(value.shape, total, dtype=np.int32)
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return answers
