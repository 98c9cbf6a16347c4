//! One file per subcommand. Each exposes `Args` and `run(args, &Context) -> anyhow::Result<ExitCode>`;
//! a subcommand never imports another one: what several share lives outside `cmd/`. `clusters` is a
//! directory: its `mod.rs` parses `clusters [NAME] [ACTION]` and dispatches to one file per action.
//! `update` is one too: its lock, its guard against an answer that wipes the routes, its report.

pub mod clusters;
pub mod completions;
pub mod config;
pub mod connections;
pub mod kubeconfig;
pub mod login;
pub mod login_jump;
pub mod logout;
pub mod man_pages;
pub mod reload;
pub mod route;
pub mod service_install;
pub mod status;
pub mod switch;
pub mod test;
pub mod update;
