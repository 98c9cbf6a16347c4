//! End-to-end scenarios: real kharond, kharonctl and curl on loopback. One test binary; each
//! module is a theme. Every scenario has its own temporary HOME and ephemeral ports.

mod clusters;
mod control;
mod direct;
mod jumphost;
mod kubeconfig;
mod login;
mod socks_malformed;
mod startup;
mod update;
mod service;
mod ssh_faults;
mod host_keys;
