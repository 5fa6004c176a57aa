//! kubelet-wrapper: see README.md, or run `kubelet-wrapper --wrapper-help`.

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let code = match kubelet_wrapper::run(&args) {
        Ok(code) => code,
        Err(e) => {
            kubelet_wrapper::log(&e.to_string());
            e.code()
        }
    };
    std::process::exit(code);
}
