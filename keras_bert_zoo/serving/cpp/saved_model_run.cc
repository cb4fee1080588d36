// saved_model_run: loads a SavedModel the way TensorFlow Serving does and runs one
// signature on raw strings, outside Python.
//
//   saved_model_run --saved_model=DIR [--signature=serving_default]
//                   [--op_library=PATH]... [--inputs=FILE] [--list]
//
// It loads each --op_library with Env::LoadDynamicLibrary (registering the ops and
// kernels the graph needs beyond core TensorFlow, e.g. tensorflow-text's), then the
// SavedModel's "serve" graph with tensorflow::LoadSavedModel, the loader TF Serving
// calls, looks up the signature in the MetaGraphDef and runs the session on it.
//
// --inputs names a text file of lines "KEY<TAB>HEX": one string of the [batch]
// string input KEY per line, in batch order, its bytes hex-encoded (so any bytes,
// newlines and invalid UTF-8 included, pass through unchanged; an empty HEX is "").
//
// Output (stdout), one block per signature output, keys in sorted order:
//   output KEY DTYPE RANK DIM0 DIM1 ...
//   one value per line, row-major: strings hex-encoded, floats with 9 significant
//   digits, integers and booleans as integers
// --list prints the signatures instead ("signature NAME METHOD", then
// "input|output KEY DTYPE SHAPE"). Exit status: 0 ok, 1 usage, 2 op library,
// 3 load, 4 signature or inputs, 5 run.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tensorflow/cc/saved_model/loader.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/protobuf/meta_graph.pb.h"
#include "tensorflow/core/public/session.h"
#include "tensorflow/core/public/session_options.h"

namespace {

// TF Serving's tag for serving graphs ("serve"); tag_constants.h is not in the wheel.
constexpr char kServeTag[] = "serve";

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

bool Unhex(const std::string& hex, std::string* bytes) {
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    int value = 0;
    for (size_t j = i; j < i + 2; ++j) {
      char c = hex[j];
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        value |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        value |= c - 'A' + 10;
      } else {
        return false;
      }
    }
    bytes->push_back(static_cast<char>(value));
  }
  return true;
}

std::string ShapeString(const tensorflow::TensorShapeProto& shape) {
  if (shape.unknown_rank()) return "?";
  std::ostringstream out;
  out << "[";
  for (int i = 0; i < shape.dim_size(); ++i) {
    if (i) out << ",";
    out << shape.dim(i).size();
  }
  out << "]";
  return out.str();
}

// One value a line, each converted to `Printed` (what `format` expects) first.
template <typename T, typename Printed>
void PrintValues(const tensorflow::Tensor& tensor, const char* format) {
  auto values = tensor.flat<T>();
  for (int64_t i = 0; i < values.size(); ++i) {
    std::printf(format, static_cast<Printed>(values(i)));
  }
}

void PrintTensor(const std::string& key, const tensorflow::Tensor& tensor) {
  std::printf("output %s %s %d", key.c_str(), tensorflow::DataTypeString(tensor.dtype()).c_str(),
              tensor.dims());
  for (int i = 0; i < tensor.dims(); ++i) {
    std::printf(" %lld", static_cast<long long>(tensor.dim_size(i)));
  }
  std::printf("\n");
  const int64_t n = tensor.NumElements();
  switch (tensor.dtype()) {
    case tensorflow::DT_STRING: {
      auto values = tensor.flat<tensorflow::tstring>();
      for (int64_t i = 0; i < n; ++i) {
        std::printf("%s\n", Hex(std::string(values(i).data(), values(i).size())).c_str());
      }
      break;
    }
    case tensorflow::DT_FLOAT:
      PrintValues<float, double>(tensor, "%.9g\n");
      break;
    case tensorflow::DT_DOUBLE:
      PrintValues<double, double>(tensor, "%.17g\n");
      break;
    case tensorflow::DT_INT32:
      PrintValues<int32_t, int>(tensor, "%d\n");
      break;
    case tensorflow::DT_INT64:
      PrintValues<int64_t, long long>(tensor, "%lld\n");
      break;
    case tensorflow::DT_BOOL:
      PrintValues<bool, int>(tensor, "%d\n");
      break;
    default:
      std::printf("unsupported\n");
  }
}

int Usage(const char* message) {
  std::cerr << "saved_model_run: " << message << "\n"
            << "usage: saved_model_run --saved_model=DIR [--signature=NAME] "
               "[--op_library=PATH]... [--inputs=FILE] [--list]\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string saved_model, signature_name = "serving_default", inputs_path;
  std::vector<std::string> op_libraries;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value_of = [&arg](const std::string& flag) -> const char* {
      return arg.rfind(flag + "=", 0) == 0 ? arg.c_str() + flag.size() + 1 : nullptr;
    };
    if (const char* v = value_of("--saved_model")) {
      saved_model = v;
    } else if (const char* v = value_of("--signature")) {
      signature_name = v;
    } else if (const char* v = value_of("--op_library")) {
      op_libraries.push_back(v);
    } else if (const char* v = value_of("--inputs")) {
      inputs_path = v;
    } else if (arg == "--list") {
      list = true;
    } else {
      return Usage(("unknown argument " + arg).c_str());
    }
  }
  if (saved_model.empty()) return Usage("--saved_model is required");

  for (const std::string& library : op_libraries) {
    void* handle = nullptr;
    absl::Status status =
        tensorflow::Env::Default()->LoadDynamicLibrary(library.c_str(), &handle);
    if (!status.ok()) {
      std::cerr << "loading op library " << library << " failed: " << status.ToString() << "\n";
      return 2;
    }
  }

  tensorflow::SavedModelBundle bundle;
  tensorflow::SessionOptions session_options;
  tensorflow::RunOptions run_options;
  absl::Status status = tensorflow::LoadSavedModel(session_options, run_options, saved_model,
                                                   {kServeTag}, &bundle);
  if (!status.ok()) {
    std::cerr << "LoadSavedModel(" << saved_model << ") failed: " << status.ToString() << "\n";
    return 3;
  }
  const auto& signatures = bundle.meta_graph_def.signature_def();

  if (list) {
    std::map<std::string, tensorflow::SignatureDef> sorted(signatures.begin(), signatures.end());
    for (const auto& [name, signature] : sorted) {
      std::printf("signature %s %s\n", name.c_str(), signature.method_name().c_str());
      std::map<std::string, tensorflow::TensorInfo> inputs(signature.inputs().begin(),
                                                           signature.inputs().end());
      std::map<std::string, tensorflow::TensorInfo> outputs(signature.outputs().begin(),
                                                            signature.outputs().end());
      for (const auto& [key, info] : inputs) {
        std::printf("input %s %s %s\n", key.c_str(),
                    tensorflow::DataTypeString(info.dtype()).c_str(),
                    ShapeString(info.tensor_shape()).c_str());
      }
      for (const auto& [key, info] : outputs) {
        std::printf("output %s %s %s\n", key.c_str(),
                    tensorflow::DataTypeString(info.dtype()).c_str(),
                    ShapeString(info.tensor_shape()).c_str());
      }
    }
    return 0;
  }

  auto found = signatures.find(signature_name);
  if (found == signatures.end()) {
    std::cerr << "no signature " << signature_name << " in " << saved_model << "\n";
    return 4;
  }
  const tensorflow::SignatureDef& signature = found->second;

  std::map<std::string, std::vector<std::string>> texts;
  if (!inputs_path.empty()) {
    std::ifstream file(inputs_path);
    if (!file) {
      std::cerr << "cannot read " << inputs_path << "\n";
      return 4;
    }
    std::string line;
    int number = 0;
    while (std::getline(file, line)) {
      ++number;
      size_t tab = line.find('\t');
      std::string bytes;
      if (tab == std::string::npos || !Unhex(line.substr(tab + 1), &bytes)) {
        std::cerr << inputs_path << ":" << number << ": expected KEY<TAB>HEX\n";
        return 4;
      }
      texts[line.substr(0, tab)].push_back(bytes);
    }
  }

  std::vector<std::pair<std::string, tensorflow::Tensor>> feeds;
  for (const auto& [key, info] : signature.inputs()) {
    auto given = texts.find(key);
    if (given == texts.end()) {
      std::cerr << "signature " << signature_name << " needs the input " << key << "\n";
      return 4;
    }
    if (info.dtype() != tensorflow::DT_STRING) {
      std::cerr << "input " << key << " is " << tensorflow::DataTypeString(info.dtype())
                << "; only string inputs are supported\n";
      return 4;
    }
    const std::vector<std::string>& values = given->second;
    tensorflow::Tensor tensor(tensorflow::DT_STRING,
                              tensorflow::TensorShape({static_cast<int64_t>(values.size())}));
    auto flat = tensor.flat<tensorflow::tstring>();
    for (size_t i = 0; i < values.size(); ++i) flat(i) = values[i];
    feeds.emplace_back(info.name(), tensor);
  }
  for (const auto& [key, values] : texts) {
    if (signature.inputs().find(key) == signature.inputs().end()) {
      std::cerr << "signature " << signature_name << " has no input " << key << "\n";
      return 4;
    }
  }

  std::map<std::string, std::string> output_names;  // key -> tensor name, sorted by key
  for (const auto& [key, info] : signature.outputs()) output_names[key] = info.name();
  std::vector<std::string> fetches;
  for (const auto& [key, name] : output_names) fetches.push_back(name);
  std::vector<tensorflow::Tensor> outputs;
  status = bundle.session->Run(feeds, fetches, {}, &outputs);
  if (!status.ok()) {
    std::cerr << "running " << signature_name << " failed: " << status.ToString() << "\n";
    return 5;
  }
  size_t index = 0;
  for (const auto& [key, name] : output_names) PrintTensor(key, outputs[index++]);
  return 0;
}
