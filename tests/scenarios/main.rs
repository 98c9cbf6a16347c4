//! End-to-end scenarios: real kharond, kharonctl and curl on loopback. One test binary; each
//! module is a theme. Every scenario has its own temporary HOME and ephemeral ports.

mod channel_close;
mod clusters;
mod control;
mod direct;
mod faults_half_close;
mod faults_hops;
mod faults_leaks;
mod faults_local_user;
mod host_keys;
mod jumphost;
mod kubeconfig;
mod login;
mod service;
mod socks_auth;
mod socks_deadline;
mod socks_malformed;
mod ssh_algorithms;
mod ssh_faults;
mod startup;
mod test_command;
mod update;
