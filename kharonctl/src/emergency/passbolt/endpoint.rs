//! Where a Passbolt API call goes: fixed path segments, data segments and query parameters under
//! the session's base URL, put together by `url::Url`. A value (a resource id, a query value) is
//! one percent-encoded path segment or one form-encoded query pair whatever it holds (`/`, `?`,
//! `#`, `&`, `%`, spaces), so it cannot change which resource is asked for or add a parameter.
//! Every call carries `api-version=v2`, as go-passbolt sends it.

/// One API endpoint, relative to the base URL.
#[derive(Debug, Clone)]
pub struct Endpoint {
    segments: Vec<String>,
    query: Vec<(&'static str, String)>,
}

impl Endpoint {
    /// The fixed path `path` (`"users/me.json"`): literal segments between `/`s. Data goes in
    /// through [`Endpoint::segment`] and [`Endpoint::query`], never in here.
    pub fn at(path: &'static str) -> Self {
        let segments = path.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect();
        Self { segments, query: Vec::new() }
    }

    /// One more path segment, percent-encoded as one segment whatever it holds.
    pub fn segment(mut self, value: impl Into<String>) -> Self {
        self.segments.push(value.into());
        self
    }

    /// One query parameter, form-encoded as one pair.
    pub fn query(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.query.push((name, value.into()));
        self
    }

    /// The URL under `base` (its path kept, one `/` between), `api-version=v2` last; `None` when
    /// `base` cannot have a path (no http(s) URL can lack one).
    pub fn under(&self, base: &url::Url) -> Option<url::Url> {
        let mut url = base.clone();
        url.path_segments_mut().ok()?.pop_if_empty().extend(&self.segments);
        url.query_pairs_mut().extend_pairs(&self.query).append_pair("api-version", "v2");
        Some(url)
    }
}

#[cfg(test)]
mod tests {
    use super::Endpoint;

    fn base(url: &str) -> url::Url {
        url::Url::parse(url).unwrap()
    }

    #[test]
    fn one_slash_between_the_base_path_and_the_endpoint_and_the_api_version_last() {
        let at = |b: &str, e: &Endpoint| e.under(&base(b)).unwrap().to_string();
        let me = Endpoint::at("/users/me.json");
        assert_eq!(at("https://p.example/vshn/", &me), "https://p.example/vshn/users/me.json?api-version=v2");
        assert_eq!(at("https://p.example/vshn", &me), "https://p.example/vshn/users/me.json?api-version=v2");
        assert_eq!(at("http://127.0.0.1:8080", &me), "http://127.0.0.1:8080/users/me.json?api-version=v2");
        let keys = Endpoint::at("metadata/keys.json").query("contain[metadata_private_keys]", "1");
        assert_eq!(
            at("https://p.example/vshn", &keys),
            "https://p.example/vshn/metadata/keys.json?contain%5Bmetadata_private_keys%5D=1&api-version=v2"
        );
    }

    #[test]
    fn a_value_with_url_syntax_stays_one_segment_or_one_pair() {
        let hostile = "a b&c=d?e#f/../g%2F.json";
        let endpoint =
            Endpoint::at("secrets/resource").segment(hostile).query("contain[x]", hostile).query("n", "1");
        let url = endpoint.under(&base("https://p.example/vshn")).unwrap();
        let segments: Vec<String> = url
            .path_segments()
            .unwrap()
            .map(|s| percent_encoding::percent_decode_str(s).decode_utf8().unwrap().into_owned())
            .collect();
        assert_eq!(segments, ["vshn", "secrets", "resource", hostile], "{url}");
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let expected = [("contain[x]", hostile), ("n", "1"), ("api-version", "v2")];
        assert_eq!(pairs, expected.map(|(k, v)| (k.to_owned(), v.to_owned())), "{url}");
        assert_eq!(url.fragment(), None, "{url}");
        // What goes on the wire parses back to the same request.
        assert_eq!(url::Url::parse(url.as_str()).unwrap(), url);
    }
}
