//! Verbatim copies of real perf_analyzer 2.50 output (the tritonclient 2.50.0 wheel's binary
//! against the nginx peer of `benches/peers/nginx.sh`, model `identity`), used as expected
//! text by the report tests. Profile exports are trimmed as in the originals.

pub const CONSOLE_HTTP_SYNC_C1_2_TXT: &str = r##"*** Measurement Settings ***
  Batch size: 1
  Service Kind: TRITON
  Using "time_windows" mode for stabilization
  Stabilizing using average latency and throughput
  Measurement window: 1000 msec
  Latency limit: 0 msec
  Concurrency limit: 2 concurrent requests
  Using synchronous calls for inference

Request concurrency: 1
  Client: 
    Request count: 78289
    Throughput: 20896.5 infer/sec
    Avg latency: 45 usec (standard deviation 90 usec)
    p50 latency: 42 usec
    p90 latency: 53 usec
    p95 latency: 55 usec
    p99 latency: 67 usec
    Avg HTTP time: 44 usec (send/recv 15 usec + response wait 29 usec)
Request concurrency: 2
  Client: 
    Request count: 156043
    Throughput: 24255.2 infer/sec
    Avg latency: 77 usec (standard deviation 428 usec)
    p50 latency: 61 usec
    p90 latency: 97 usec
    p95 latency: 114 usec
    p99 latency: 176 usec
    Avg HTTP time: 73 usec (send/recv 29 usec + response wait 44 usec)
Inferences/Second vs. Client Average Batch Latency
Concurrency: 1, throughput: 20896.5 infer/sec, latency 45 usec
Concurrency: 2, throughput: 24255.2 infer/sec, latency 77 usec
"##;

pub const CONSOLE_HTTP_ASYNC_C4_VERBOSE_P95_TXT: &str = r##"*** Measurement Settings ***
  Batch size: 1
  Service Kind: TRITON
  Using "time_windows" mode for stabilization
  Stabilizing using p95throughput
  Measurement window: 1000 msec
  Using asynchronous calls for inference

Request concurrency: 4
  Pass [1] throughput: 31404.9 infer/sec. p95 latency: 188 usec
  Pass [2] throughput: 28178.3 infer/sec. p95 latency: 205 usec
  Pass [3] throughput: 28469.7 infer/sec. p95 latency: 188 usec
  Pass [4] throughput: 27659.1 infer/sec. p95 latency: 206 usec
  Client: 
    Request count: 171334
    Throughput: 28077.6 infer/sec
    Avg client overhead: 0.00%
    p50 latency: 92 usec
    p90 latency: 169 usec
    p95 latency: 201 usec
    p99 latency: 296 usec
    Avg HTTP time: 106 usec (send 51 usec + response wait 55 usec + receive 0 usec)
Inferences/Second vs. Client p95 Batch Latency
Concurrency: 4, throughput: 28077.6 infer/sec, latency 201 usec
"##;

pub const CONSOLE_GRPC_POISSON_2000_TXT: &str = r##"*** Measurement Settings ***
  Batch size: 1
  Service Kind: TRITON
  Using "time_windows" mode for stabilization
  Stabilizing using average latency and throughput
  Measurement window: 1000 msec
  Using poisson distribution on request generation
  Using synchronous calls for inference

Request Rate: 2000 inference requests per seconds
  Client: 
    Request count: 7462
    Throughput: 2060.77 infer/sec
    Avg latency: 168 usec (standard deviation 119 usec)
    p50 latency: 145 usec
    p90 latency: 277 usec
    p95 latency: 346 usec
    p99 latency: 526 usec
    Avg gRPC time: 159 usec ((un)marshal request/response 3 usec + response wait 156 usec)
Inferences/Second vs. Client Average Batch Latency
Request Rate: 2000, throughput: 2060.77 infer/sec, latency 168 usec
"##;

pub const CONSOLE_HTTP_REQUEST_COUNT_5000_TXT: &str = r##"*** Measurement Settings ***
  Batch size: 1
  Service Kind: TRITON
  Sending 5000 benchmark requests
  Using synchronous calls for inference

Request concurrency: 2
  Client: 
    Request count: 5000
    Throughput: 4999.48 infer/sec
    Avg latency: 52 usec (standard deviation 45 usec)
    p50 latency: 46 usec
    p90 latency: 67 usec
    p95 latency: 79 usec
    p99 latency: 118 usec
    Avg HTTP time: 49 usec (send/recv 19 usec + response wait 30 usec)
Inferences/Second vs. Client Average Batch Latency
Concurrency: 2, throughput: 4999.48 infer/sec, latency 52 usec
"##;

pub const HTTP_SYNC_C1_2_CSV: &str = r##"Concurrency,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency
1,20896.5,15,0,42,53,55,67
2,24255.2,29,0,61,97,114,176
"##;

pub const HTTP_ASYNC_C4_VERBOSE_P95_CSV: &str = r##"Concurrency,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency,request/response,response wait
4,28077.6,51,0,92,169,201,296,51,55
"##;

pub const GRPC_POISSON_2000_CSV: &str = r##"Request Rate,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency
2000,2060.77,3,0,145,277,346,526
"##;

pub const PROFILE_EXPORT_HTTP_CONCURRENCY_JSON: &str = r##"{"experiments":[{"experiment":{"mode":"concurrency","value":1},"requests":[{"timestamp":1795298554868541250,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298554868971331],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]},{"timestamp":1795298554868978494,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298554869106061],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]},{"timestamp":1795298554869110995,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298554869180847],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]}],"window_boundaries":[1795298554868407815,1795298556068483641,1795298557340100587,1795298558614923281]},{"experiment":{"mode":"concurrency","value":2},"requests":[{"timestamp":1795298558683747917,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298558684552759],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]},{"timestamp":1795298558684558948,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298558684620474],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]},{"timestamp":1795298558684642324,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298558684728520],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]}],"window_boundaries":[1795298558683715664,1795298559883808243,1795298561631556640,1795298563712129374,1795298565832370303,1795298568481701181]}],"version":"","service_kind":"triton","endpoint":""}"##;

pub const PROFILE_EXPORT_GRPC_REQUEST_RATE_JSON: &str = r##"{"experiments":[{"experiment":{"mode":"request_rate","value":2000.0},"requests":[{"timestamp":1795298591626614736,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298591626883516],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]},{"timestamp":1795298591629471640,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298591629714366],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]},{"timestamp":1795298591635209614,"request_inputs":{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]},"response_timestamps":[1795298591635339819],"response_outputs":[{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]}],"window_boundaries":[1795298591626399721,1795298592826465941,1795298594033094463,1795298595238700887,1795298596446162887,1795298597654491708]}],"version":"","service_kind":"triton","endpoint":""}"##;
