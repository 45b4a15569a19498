# syntax=docker/dockerfile:1
# vLLM with gpuguard inside, for deploy/kubernetes/components/baked-in-binary
# (no init container, nothing copied at pod start). Build the gpuguard image
# first (Dockerfile beside this one), then:
#   docker build -f deploy/container/vllm.Dockerfile -t vllm-gpuguard .
ARG GPUGUARD_IMAGE=gpuguard:latest
ARG VLLM_IMAGE=vllm/vllm-openai:v0.11.0
FROM ${GPUGUARD_IMAGE} AS gpuguard

FROM ${VLLM_IMAGE}
COPY --from=gpuguard /usr/local/bin/gpuguard /usr/local/bin/gpuguard
# The Deployment sets the command and its flags; this makes `docker run`
# behave the same with a policy mounted at /etc/gpuguard/policy.toml.
ENTRYPOINT ["/usr/local/bin/gpuguard", "run", "--policy", "/etc/gpuguard/policy.toml"]
CMD []
