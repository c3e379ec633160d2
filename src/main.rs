fn main() -> std::process::ExitCode {
    hydradns::cli::main()
}
