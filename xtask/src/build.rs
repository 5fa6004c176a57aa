//! Builds this workspace's static binaries (kubelet-wrapper, the test
//! stand-in) for a target architecture.
