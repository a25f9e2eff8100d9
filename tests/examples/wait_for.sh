# Sourced by the launcher tests: `wait_for WHAT TEST...` waits up to 120 s for the command TEST
# to succeed, checking `still_running` (the caller's: false once the job it waits on is gone)
# between tries; it calls the caller's `give_up WHAT` when the time is out or the job is gone.
wait_for() {
  wait_what=$1
  shift
  wait_tries=0
  until "$@"; do
    wait_tries=$((wait_tries + 1))
    [ $wait_tries -lt 1200 ] || give_up "$wait_what"
    still_running || give_up "ended before: $wait_what"
    sleep 0.1
  done
}
