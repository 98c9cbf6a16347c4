//! End-to-end scenarios: real kharond, kharonctl and curl on loopback. One test binary; each
//! module is a theme. Every scenario has its own temporary HOME and ephemeral ports.

mod activation;
mod channel_close;
mod clusters;
mod control;
mod control_socket;
mod direct;
mod emergency;
mod faults_half_close;
mod faults_hops;
mod faults_leaks;
mod faults_local_user;
mod first_start;
mod host_keys;
mod hostile_input;
mod http_connect;
mod install;
mod jumphost;
mod kubeconfig;
mod login;
mod pac;
mod reload;
mod reload_atomic;
mod scale;
mod service;
mod slots;
mod socks_auth;
mod socks_deadline;
mod socks_malformed;
mod ssh_algorithms;
mod ssh_config_match;
mod ssh_config_oracle;
mod ssh_faults;
mod startup;
mod test_command;
mod update;
