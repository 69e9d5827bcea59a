# Ruby's own timed waits, each printed with the CLOCK_MONOTONIC time since the
# start (ns) at which it returned: Timeout (a timer thread), a condition
# variable, threads sleeping in turn under the GVL, and IO.select.
require 'timeout'

START = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
def report(what) = puts("#{what} #{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - START}")

begin
  Timeout.timeout(2) { sleep 10 }
rescue Timeout::Error
  report 'timeout'
end
mutex = Mutex.new
condition = ConditionVariable.new
mutex.synchronize { condition.wait(mutex, 1.5) }
report 'condition'
threads = 4.times.map { |i| Thread.new { sleep(0.5 * i) } }
threads.each(&:join)
report 'threads'
reader, _writer = IO.pipe
ready = IO.select([reader], nil, nil, 0.25)
report "select=#{ready.inspect}"
