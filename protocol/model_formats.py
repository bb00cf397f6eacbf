"""The model formats a job may name (JobSpec.model_format): a module of its own, without numpy, so
that the renter's command help (`unchained job --help`) lists them without loading protocol.jobs."""

MODEL_FORMATS = ("torchscript", "onnx")
