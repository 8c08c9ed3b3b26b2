#include "support/fake_kube/protobuf.h"

#include <cpprest/asyncrt_utils.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace shoal::testing {
namespace {

using web::json::value;

// One field of a protobuf message: its number, wire type and payload (varint or bytes).
struct Field {
  uint32_t number = 0;
  int wire = 0;
  uint64_t varint = 0;
  std::string_view bytes;
};

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }
  Status Next(Field* f) {
    uint64_t key = 0;
    SHOAL_RETURN_IF_ERROR(Varint(&key));
    f->number = static_cast<uint32_t>(key >> 3);
    f->wire = static_cast<int>(key & 7);
    switch (f->wire) {
      case 0:
        return Varint(&f->varint);
      case 1:
        return Skip(8);
      case 2: {
        uint64_t len = 0;
        SHOAL_RETURN_IF_ERROR(Varint(&len));
        if (len > data_.size() - pos_) return Status::InvalidArgument("truncated protobuf field");
        f->bytes = data_.substr(pos_, len);
        pos_ += len;
        return Status::Ok();
      }
      case 5:
        return Skip(4);
      default:
        return Status::InvalidArgument("unsupported protobuf wire type " + std::to_string(f->wire));
    }
  }

 private:
  Status Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return Status::InvalidArgument("truncated protobuf varint");
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *out = v;
        return Status::Ok();
      }
    }
    return Status::InvalidArgument("protobuf varint too long");
  }
  Status Skip(size_t n) {
    if (n > data_.size() - pos_) return Status::InvalidArgument("truncated protobuf field");
    pos_ += n;
    return Status::Ok();
  }
  std::string_view data_;
  size_t pos_ = 0;
};

std::string S(std::string_view b) { return std::string(b); }

// map<string, string|bytes> entry: key = 1, value = 2.
Status MapEntry(std::string_view entry, std::string* key, std::string* val) {
  Reader r(entry);
  while (!r.done()) {
    Field f;
    SHOAL_RETURN_IF_ERROR(r.Next(&f));
    if (f.number == 1 && f.wire == 2) *key = S(f.bytes);
    if (f.number == 2 && f.wire == 2) *val = S(f.bytes);
  }
  return Status::Ok();
}

// metav1.ObjectMeta: name 1, generateName 2, namespace 3, uid 5, resourceVersion 6,
// generation 7, labels 11, annotations 12, ownerReferences 13 (not decoded: refused), finalizers 14.
Result<value> ObjectMeta(std::string_view data) {
  value m = value::object();
  Reader r(data);
  while (!r.done()) {
    Field f;
    SHOAL_RETURN_IF_ERROR(r.Next(&f));
    switch (f.number) {
      case 1: m["name"] = value::string(S(f.bytes)); break;
      case 2: m["generateName"] = value::string(S(f.bytes)); break;
      case 3: m["namespace"] = value::string(S(f.bytes)); break;
      case 5: m["uid"] = value::string(S(f.bytes)); break;
      case 6: m["resourceVersion"] = value::string(S(f.bytes)); break;
      case 11:
      case 12: {
        std::string k, v;
        SHOAL_RETURN_IF_ERROR(MapEntry(f.bytes, &k, &v));
        m[f.number == 11 ? "labels" : "annotations"][k] = value::string(v);
        break;
      }
      case 13:
        return Status::FailedPrecondition("ownerReferences in a protobuf body are not decoded here");
      case 14: {
        value& list = m["finalizers"];
        if (!list.is_array()) list = value::array();
        list[list.size()] = value::string(S(f.bytes));
        break;
      }
      default:
        break;  // selfLink, timestamps, managedFields: the server sets or ignores them
    }
  }
  return m;
}

std::string Base64(std::string_view bytes) {
  return utility::conversions::to_base64(std::vector<unsigned char>(bytes.begin(), bytes.end()));
}

}  // namespace

Result<value> DecodeProtobufObject(const std::string& body) {
  if (body.size() < 4 || body.compare(0, 4, std::string("k8s\0", 4)) != 0) {
    return Status::InvalidArgument("the protobuf body lacks the k8s\\0 envelope prefix");
  }
  Reader unknown(std::string_view(body).substr(4));
  std::string api_version, kind;
  std::string_view raw;
  while (!unknown.done()) {
    Field f;
    SHOAL_RETURN_IF_ERROR(unknown.Next(&f));
    if (f.number == 1 && f.wire == 2) {  // TypeMeta: apiVersion 1, kind 2
      Reader tm(f.bytes);
      while (!tm.done()) {
        Field g;
        SHOAL_RETURN_IF_ERROR(tm.Next(&g));
        if (g.number == 1) api_version = S(g.bytes);
        if (g.number == 2) kind = S(g.bytes);
      }
    } else if (f.number == 2 && f.wire == 2) {
      raw = f.bytes;
    }
  }
  if (kind == "DeleteOptions") {
    // gracePeriodSeconds 1, preconditions 2 (uid 1, resourceVersion 2), orphanDependents 3,
    // propagationPolicy 4, dryRun 5.
    value opts = value::object();
    opts["apiVersion"] = value::string(api_version.empty() ? "v1" : api_version);
    opts["kind"] = value::string(kind);
    Reader r(raw);
    while (!r.done()) {
      Field f;
      SHOAL_RETURN_IF_ERROR(r.Next(&f));
      if (f.number == 1 && f.wire == 0) {
        opts["gracePeriodSeconds"] = value::number(static_cast<int64_t>(f.varint));
      } else if (f.number == 2 && f.wire == 2) {
        Reader p(f.bytes);
        while (!p.done()) {
          Field g;
          SHOAL_RETURN_IF_ERROR(p.Next(&g));
          if (g.number == 1) opts["preconditions"]["uid"] = value::string(S(g.bytes));
          if (g.number == 2) opts["preconditions"]["resourceVersion"] = value::string(S(g.bytes));
        }
      } else if (f.number == 3 && f.wire == 0) {
        opts["orphanDependents"] = value::boolean(f.varint != 0);
      } else if (f.number == 4 && f.wire == 2) {
        opts["propagationPolicy"] = value::string(S(f.bytes));
      } else if (f.number == 5 && f.wire == 2) {
        value& list = opts["dryRun"];
        if (!list.is_array()) list = value::array();
        list[list.size()] = value::string(S(f.bytes));
      }
    }
    return opts;
  }
  const bool core =
      api_version == "v1" && (kind == "Secret" || kind == "ConfigMap" || kind == "Namespace");
  const bool token_request = api_version == "authentication.k8s.io/v1" && kind == "TokenRequest";
  if (!core && !token_request) {
    return Status::FailedPrecondition("protobuf bodies of " + api_version + " " + kind +
                                 " are not decoded here; send JSON");
  }
  value obj = value::object();
  obj["apiVersion"] = value::string(api_version);
  obj["kind"] = value::string(kind);
  Reader r(raw);
  while (!r.done()) {
    Field f;
    SHOAL_RETURN_IF_ERROR(r.Next(&f));
    if (f.number == 1 && f.wire == 2) {
      auto meta = ObjectMeta(f.bytes);
      if (!meta.ok()) return meta.status();
      obj["metadata"] = *meta;
      continue;
    }
    if (kind == "TokenRequest") {
      // spec 2 (audiences 1, expirationSeconds 4, boundObjectRef 3: kind 1, apiVersion 2,
      // name 3, uid 4); status 3 is the server's.
      if (f.number != 2 || f.wire != 2) continue;
      value spec = value::object();
      Reader sr(f.bytes);
      while (!sr.done()) {
        Field g;
        SHOAL_RETURN_IF_ERROR(sr.Next(&g));
        if (g.number == 1 && g.wire == 2) {
          if (!spec.has_field("audiences")) spec["audiences"] = value::array();
          spec["audiences"][spec["audiences"].size()] = value::string(S(g.bytes));
        } else if (g.number == 4 && g.wire == 0) {
          spec["expirationSeconds"] = value::number(static_cast<int64_t>(g.varint));
        } else if (g.number == 3 && g.wire == 2) {
          Reader br(g.bytes);
          value ref = value::object();
          static constexpr const char* kRefFields[] = {"", "kind", "apiVersion", "name", "uid"};
          while (!br.done()) {
            Field h;
            SHOAL_RETURN_IF_ERROR(br.Next(&h));
            if (h.number >= 1 && h.number <= 4 && h.wire == 2) {
              ref[kRefFields[h.number]] = value::string(S(h.bytes));
            }
          }
          spec["boundObjectRef"] = ref;
        }
      }
      obj["spec"] = spec;
    } else if (kind == "Namespace") {
      // spec 2 (NamespaceSpec: finalizers 1); status 3 is the server's.
      if (f.number == 2 && f.wire == 2) {
        Reader spec(f.bytes);
        value finalizers = value::array();
        while (!spec.done()) {
          Field g;
          SHOAL_RETURN_IF_ERROR(spec.Next(&g));
          if (g.number == 1 && g.wire == 2) finalizers[finalizers.size()] = value::string(S(g.bytes));
        }
        obj["spec"]["finalizers"] = finalizers;
      }
    } else if (kind == "Secret") {
      // data 2 (map<string, bytes>), type 3, stringData 4, immutable 5.
      if (f.number == 2 || f.number == 4) {
        std::string k, v;
        SHOAL_RETURN_IF_ERROR(MapEntry(f.bytes, &k, &v));
        if (f.number == 2) {
          obj["data"][k] = value::string(Base64(v));
        } else {
          obj["stringData"][k] = value::string(v);
        }
      } else if (f.number == 3) {
        obj["type"] = value::string(S(f.bytes));
      } else if (f.number == 5) {
        obj["immutable"] = value::boolean(f.varint != 0);
      }
    } else {
      // ConfigMap: data 2 (map<string, string>), binaryData 3 (map<string, bytes>), immutable 4.
      if (f.number == 2 || f.number == 3) {
        std::string k, v;
        SHOAL_RETURN_IF_ERROR(MapEntry(f.bytes, &k, &v));
        if (f.number == 2) {
          obj["data"][k] = value::string(v);
        } else {
          obj["binaryData"][k] = value::string(Base64(v));
        }
      } else if (f.number == 4) {
        obj["immutable"] = value::boolean(f.varint != 0);
      }
    }
  }
  return obj;
}

}  // namespace shoal::testing
