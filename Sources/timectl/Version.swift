/// The version of timectl and TimeControlKit, in one place: `timectl --version`
/// prints it, and scripts/package-deb.sh names the package after it.
let timectlVersion = "0.1.0"
