//! One file per subcommand. Each exposes `Args` and `run(args, &Context) -> anyhow::Result<ExitCode>`;
//! a subcommand never calls another one's `run`.

pub mod reload;
pub mod route;
pub mod status;
