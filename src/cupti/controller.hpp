// The tracer's own thread: samples clocks and power every `sample_period_ms`, asks CUPTI to flush its
// buffers every `flush_period_ms`, and stops the trace once the tracer says so (steps reached, record cap,
// write error) or `duration_s` has passed. It never runs on the application's threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "cupti/clock_source.hpp"
#include "cupti/tracer.hpp"

namespace gearshift::cupti {

struct ControllerHooks {
  std::function<std::int64_t()> now_ns;             // the trace's clock (cuptiGetTimestamp), ns
  std::function<void()> flush;                      // cuptiActivityFlushAll(0); may be empty
  std::function<void(const std::string&)> stop;     // stop tracing with this reason; called at most once
  bool flush_after_stop = false;  // keep flushing after the stop (the runtime feed still needs activity)
};

class Controller {
 public:
  // `tracer` may be null (the runtime feed without a trace file: periodic flushes only); `clocks` may be null
  // (no sampling); both must outlive the controller.
  Controller(Tracer* tracer, ClockSource* clocks, ControllerHooks hooks, int sample_period_ms,
             int flush_period_ms, double duration_s);
  ~Controller();  // shutdown()
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Ends the thread (without calling stop). Safe to call twice and from any thread but the controller's.
  void shutdown();
  // Takes one sample of every device now (also used at the start and the end of a trace).
  void sample_now();

 private:
  void loop();

  Tracer* tracer_;
  ClockSource* clocks_;
  ControllerHooks hooks_;
  int sample_ms_, flush_ms_;
  double duration_s_;
  std::int64_t start_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace gearshift::cupti
